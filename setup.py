"""Package discovery. The repository root is the import package `kbroker` (pyproject.toml's
package-dir), which setuptools' own `packages.find` cannot express: it would find `broker`, not
`kbroker.broker`. So the runtime packages are found here, under the folders that make up the
broker, and everything else (tests/, tools/, bench/) stays out of the wheel.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
RUNTIME = ("broker", "protocol", "coordinator", "purgatory", "pipeline", "admin")

packages = ["kbroker"]
for top in RUNTIME:
    # Namespace discovery also yields data-only folders (protocol/schema/*), so their JSON ships
    # as package data without setuptools' "absent from the packages configuration" warning.
    found = find_namespace_packages(where=str(ROOT), include=[top, f"{top}.*"], exclude=["*.__pycache__"])
    packages += [f"kbroker.{name}" for name in found]


class BuildPy(build_py):
    """The root package's modules are __init__ and __main__; this script is not one of them."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if not (package == "kbroker" and m[1] == "setup")]


setup(packages=sorted(packages), cmdclass={"build_py": BuildPy})
