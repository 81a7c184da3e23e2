import sys

from dpgate.interfaces.cli import main

sys.exit(main())
