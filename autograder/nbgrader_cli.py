"""`python -m autograder.nbgrader_cli ARGS` is `python -m nbgrader ARGS`, 2.5 s sooner.

Importing nbgrader imports jsonschema's format checkers, and one of them, `rfc3987_syntax` (the
"iri" format, pulled in by jupyter-events' format extras), compiles a grammar at import: 2.5 s of
a 4.2 s nbgrader start on the course's machine (`python -X importtime -c "import
nbgrader.apps.nbgraderapp"`). nbgrader never validates that format; with the import blocked,
jsonschema leaves the checker out (it imports it under `suppress(ImportError)`). Every
submission's grading starts nbgrader once, inside the sandbox, so this is in the kernel side.
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)  # a blocked import: ImportError, which jsonschema expects

from nbgrader.apps.nbgraderapp import main  # noqa: E402 - after the block

if __name__ == "__main__":
    sys.exit(main())
