"""What the agefast command imports, seen from inside its process."""


def probe(report: str) -> str:
    """A `python -c` script that runs the agefast command on its own arguments, then
    the one line of Python `report`, which finds in `imported` the modules the
    command imported, in order (not those a site hook loaded before it)."""
    return ("import runpy, sys\n"
            "before = set(sys.modules)\n"
            "sys.argv = ['agefast', *sys.argv[1:]]\n"
            "try:\n"
            "    runpy.run_module('agefast', run_name='__main__')\n"
            "finally:\n"
            "    imported = [name for name in sys.modules if name not in before]\n"
            f"    {report}\n")
