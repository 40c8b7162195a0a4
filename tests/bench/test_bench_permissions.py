"""The bench's permission mode (``--permission-mode``, with ``--mode`` its old name, dontAsk included) and the
trust it states for the workspaces it generates."""

from __future__ import annotations

from bench.run_options import build_config, build_parser


def test_the_permission_mode_option_and_its_old_name() -> None:
    def mode(*argv: str) -> str:
        return build_config(build_parser().parse_args([*argv, "--quick"])).mode

    assert mode() == "acceptEdits"
    assert mode("--permission-mode", "dontAsk") == "dontAsk"
    assert mode("--mode", "plan") == "plan"
    assert "trusts them" in build_parser().format_help()
