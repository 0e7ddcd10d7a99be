// Subcommands of sonopipe-sim, one per chain; each adds itself to the app (see main.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace sonopipe::sim {

void add_speckle_command(CLI::App& app);   // speckle_command.cpp: generic IQ/RF frames
void add_perfusion_command(CLI::App& app);  // perfusion_command.cpp: DCE liver series + truth (NIfTI)
void add_arfi_command(CLI::App& app);      // arfi_command.cpp: ARFI sets with displacement truth
void add_strain_command(CLI::App& app);    // strain_command.cpp: compression + inclusion, truth
void add_channel_command(CLI::App& app);   // channel_command.cpp: per-element data before beamforming
void add_flow_command(CLI::App& app);      // flow_command.cpp: Doppler ensembles with velocity truth

}  // namespace sonopipe::sim
