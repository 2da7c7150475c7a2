"""``python -m harness``."""

from harness.cli import main

if __name__ == "__main__":
    main()
