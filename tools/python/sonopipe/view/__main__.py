import sys

from sonopipe.view.cli import main

sys.exit(main())
