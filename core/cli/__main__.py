"""``python -m tenantq.cli``."""

from tenantq.cli import main

# Guarded: a handler process (multiprocessing's spawn) imports this module again as
# ``__mp_main__``, and must not run the command line a second time.
if __name__ == "__main__":
    main()
