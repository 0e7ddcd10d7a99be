import sys

from sonopipe.web.cli import main

sys.exit(main())
