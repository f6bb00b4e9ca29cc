"""The one compiled part: the trace parser's native fast path (analyzer_job/stepscope_analyzer/parse/_scan.c).

Optional: where no C compiler is found the install goes on without it and the parser uses its Python path (same
results, about 2.4x slower to parse); everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "stepscope_analyzer.parse._scan",
            ["analyzer_job/stepscope_analyzer/parse/_scan.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            optional=True,
        )
    ]
)
