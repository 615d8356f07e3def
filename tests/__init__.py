"""The test suite, a package: test modules are named ``tests.<folder>.<module>``, so no test folder
shadows a package of the project (tests/server and ``server``) and two folders may hold files of the
same name. Shared helpers are in ``tests.support``."""
