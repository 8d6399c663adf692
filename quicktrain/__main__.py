import sys

from quicktrain.cli import main

sys.exit(main())
