"""python -m tools.golden VERB ...: fit, validate, power, shape, validation_null."""

import sys

from tools.golden import fit, power, shape, validate, validation_null

VERBS = {
    "fit": fit.main,
    "validate": validate.main,
    "power": power.main,
    "shape": shape.main,
    "validation_null": validation_null.main,
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in VERBS:
        usage = f"python -m tools.golden {{{','.join(VERBS)}}} ..."
        print(f"{usage}\n\n{sys.modules['tools.golden'].__doc__}")
        return 2
    return VERBS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
