#!/usr/bin/python3
"""Draws docs/doppler_disk.png from the images tests/stages/doppler/disk_test.cpp writes with
SONOPIPE_DOPPLER_FIGURES=<folder>: power Doppler (dB), axial velocity, and the velocity profile
through the disk's centre against the fitted rigid rotation.
  SONOPIPE_DOPPLER_FIGURES=/tmp/fig build/tests/disk_test && docs/doppler_disk.py /tmp/fig docs/doppler_disk.png
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

folder, out = sys.argv[1], sys.argv[2]
n = 126  # the test's grid: x -12.5..12.5 mm, z 10..35 mm, 126 x 126
x = np.linspace(-12.5, 12.5, n)
z = np.linspace(10, 35, n)
velocity = np.fromfile(f"{folder}/disk_velocity.f32", dtype=np.float32).reshape(n, n).T  # [axial, lateral]
power_db = np.fromfile(f"{folder}/disk_power_db.f32", dtype=np.float32).reshape(n, n).T
omega, x0, residual, cx, cz, radius = np.loadtxt(f"{folder}/disk_fit.txt")
extent = [x[0], x[-1], z[-1], z[0]]
fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
im = axes[0].imshow(power_db - np.nanmax(power_db), extent=extent, cmap="gray", vmin=-40, vmax=0)
axes[0].set_title("power Doppler (dB)")
fig.colorbar(im, ax=axes[0])
masked = np.where(power_db - np.nanmax(power_db) > -30, velocity, np.nan)
im = axes[1].imshow(masked, extent=extent, cmap="RdBu_r", vmin=-0.74, vmax=0.74)
axes[1].set_title("axial velocity (m/s, + = away), |v| <= v_N")
fig.colorbar(im, ax=axes[1])
for a in axes[:2]:
    a.set_xlabel("x (mm)")
    a.set_ylabel("z (mm)")
    a.add_patch(plt.Circle((cx * 1e3, cz * 1e3), 0.8 * radius * 1e3, fill=False, ls="--", color="k"))
row = np.argmin(np.abs(z - cz * 1e3))
inside = np.abs(x - cx * 1e3) <= 0.8 * radius * 1e3
axes[2].plot(x[inside], velocity[row, inside], ".", label=f"estimate at z = {z[row]:.1f} mm")
axes[2].plot(x[inside], omega * (x[inside] * 1e-3 - x0), "-",
             label=f"fit: omega {omega:.2f} rad/s, x0 {x0 * 1e3:.2f} mm\nresidual rms {residual * 1e3:.1f} mm/s (whole disk)")
axes[2].set_xlabel("x (mm)")
axes[2].set_ylabel("v (m/s)")
axes[2].legend(fontsize=8)
axes[2].grid(True)
fig.suptitle("PyMUST PWI_disk.mat (LGPL-2.1): beamform -> clutter_filter (SVD, k = 1) -> doppler (Kasai, 5 x 5 box)")
fig.tight_layout()
fig.savefig(out, dpi=90)
