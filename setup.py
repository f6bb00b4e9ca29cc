"""The compiled parts: the trace parser's native fast path (analyzer_job/stepscope_analyzer/parse/_scan.c) and the
interval analyses' kernels (analyzer_job/stepscope_analyzer/analyses/_interval_kernels.c).

Optional: where no C compiler is found the install goes on without them and the analyzer uses its Python paths
(same results; about 2.4x slower to parse, numpy for the interval kernels); everything else is declared in
pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "stepscope_analyzer.parse._scan",
            ["analyzer_job/stepscope_analyzer/parse/_scan.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            optional=True,
        ),
        Extension(
            "stepscope_analyzer.analyses._interval_kernels",
            ["analyzer_job/stepscope_analyzer/analyses/_interval_kernels.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            optional=True,
        ),
    ]
)
