// SIGINT/SIGTERM for the long-running tools: the first signal asks the tool to stop cleanly
// (finish the current message, flush, report); a second one restores the default action.
#pragma once

namespace sonopipe::tools {

void install_stop_handlers();   // SIGINT and SIGTERM set the stop flag
bool stop_requested();
int stop_signal_number();       // the signal that asked to stop, 0 if none

}  // namespace sonopipe::tools
