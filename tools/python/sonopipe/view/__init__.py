"""sonopipe-view, the display client (run as `sonopipe-view` or `python -m sonopipe.view`).

cli.py: arguments and the draw loop; sources.py: live (conflating Subscriber) or recording input,
grouped per input frame; arfi.py, strain.py, perfusion.py, generic.py: one view per chain;
panels.py, units.py, bmode.py, overlay.py: shared plotting pieces.
"""
