"""Build hook: ship the top-level ``rules/*.toml`` inside the package as ``kernellsp/data/rules``.

The rule files stay in the repository's top-level ``rules/`` (one rule, one file, where users and
reviewers look for them); a wheel or a non-editable install gets a copy, which
``kernellsp.rules.engine.bundled_rules_dir`` finds when no source checkout is around it.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithRules(build_py):
    """``build_py`` plus the rule files copied into the built package."""

    def run(self) -> None:
        super().run()
        src = Path(__file__).resolve().parent / "rules"
        dest = Path(self.build_lib) / "kernellsp" / "data" / "rules"
        rule_files = sorted(src.glob("*.toml"))
        if not rule_files:
            raise SystemExit(f"no rule files in {src}: refusing to build a kernellsp without its rules")
        dest.mkdir(parents=True, exist_ok=True)
        for f in [*rule_files, *src.glob("*.md")]:
            shutil.copy2(f, dest / f.name)


setup(cmdclass={"build_py": BuildPyWithRules})
