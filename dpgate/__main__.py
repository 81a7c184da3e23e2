import sys

from dpgate.cli import main

sys.exit(main())
