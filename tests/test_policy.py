from __future__ import annotations

from pathlib import Path

import pytest

from nexus_store.compaction.policy import (
    ENV_VARS,
    CompactionConfig,
    LayerConfig,
    evaluate_degradation,
    layer_threshold,
    load_config,
    record_flush,
    select_layer,
    should_block_auto_compaction,
    should_compact,
    should_flush,
    trigger_threshold,
)
from nexus_store.errors import NexusError

CFG = CompactionConfig()


class TestDefaults:
    def test_seed_defaults(self) -> None:
        assert (CFG.context_window, CFG.reserve_tokens_floor, CFG.soft_threshold_tokens) == (
            200_000,
            20_000,
            4_000,
        )
        assert CFG.keep_recent_tokens == 20_000
        assert (CFG.warn_at_compaction, CFG.max_auto_compactions) == (3, 5)
        assert [(x.name, x.trigger_percent, x.protect_recent_tokens) for x in CFG.layers] == [
            ("prune", 80, 40_000),
            ("summarize", 88, 25_000),
            ("full", 95, 15_000),
        ]
        prune = CFG.layer("prune")
        assert prune is not None and prune.min_tool_output_tokens == 50_000 and not prune.use_llm
        assert CFG.prune.protect_tokens == 40_000 and CFG.prune.minimum_tokens == 20_000
        assert CFG.summarizer.kind == "extractive"
        assert CFG.max_chunk_tokens == 80_000

    def test_config_is_frozen(self) -> None:
        with pytest.raises(Exception, match="frozen"):
            CFG.context_window = 5  # type: ignore[misc]


class TestTrigger:
    def test_threshold_formula(self) -> None:
        assert trigger_threshold(CFG) == 176_000
        small = CompactionConfig(
            context_window=100_000, reserve_tokens_floor=15_000, soft_threshold_tokens=3_000
        )
        assert trigger_threshold(small) == 82_000

    @pytest.mark.parametrize(
        ("tokens", "expected"), [(175_999, False), (176_000, True), (176_001, True), (0, False)]
    )
    def test_should_compact_boundary(self, tokens: int, expected: bool) -> None:
        assert should_compact(tokens, CFG) is expected


class TestLayers:
    @pytest.mark.parametrize(
        ("tokens", "tool_tokens", "expected"),
        [
            (159_999, 100_000, None),
            (160_000, 100_000, "prune"),
            (160_000, 50_001, "prune"),
            (160_000, 50_000, None),  # strictly more than 50K of tool output
            (175_999, 50_000, None),
            (175_999, 0, None),
            (176_000, 0, "summarize"),
            (176_000, 200_000, "summarize"),
            (189_999, 0, "summarize"),
            (190_000, 0, "full"),
            (190_000, 150_000, "full"),  # the most severe layer wins
            (250_000, 0, "full"),
        ],
    )
    def test_select_layer_boundaries(
        self, tokens: int, tool_tokens: int, expected: str | None
    ) -> None:
        layer = select_layer(tokens, tool_tokens, CFG)
        assert (layer.name if layer else None) == expected

    def test_layer_threshold_is_exact(self) -> None:
        layer = LayerConfig(name="summarize", trigger_percent=87.3, protect_recent_tokens=0)
        assert layer_threshold(layer, 1000) == 873  # 872.9999... with floats
        assert layer_threshold(layer, 1001) == 874  # ceil(873.873)
        cfg = CompactionConfig(
            context_window=1000, reserve_tokens_floor=0, soft_threshold_tokens=0, layers=(layer,)
        )
        assert select_layer(872, 0, cfg) is None
        assert select_layer(873, 0, cfg) == layer

    def test_custom_layers(self) -> None:
        cfg = CompactionConfig(
            layers=(LayerConfig(name="full", trigger_percent=50, protect_recent_tokens=1),)
        )
        assert select_layer(99_999, 0, cfg) is None
        selected = select_layer(100_000, 0, cfg)
        assert selected is not None and selected.name == "full"


class TestDegradation:
    @pytest.mark.parametrize(
        ("count", "risk", "loss"),
        [
            (0, "low", 0),
            (1, "low", 10),
            (2, "medium", 20),
            (3, "high", 30),
            (4, "high", 40),
            (5, "critical", 50),
            (12, "critical", 90),
        ],
    )
    def test_risk_levels(self, count: int, risk: str, loss: int) -> None:
        d = evaluate_degradation(count, CFG)
        assert (d.compaction_count, d.risk, d.information_loss_estimate) == (count, risk, loss)
        assert d.recommendation

    def test_limits_come_from_config(self) -> None:
        cfg = CompactionConfig(warn_at_compaction=2, max_auto_compactions=3)
        assert [evaluate_degradation(n, cfg).risk for n in range(5)] == [
            "low",
            "medium",
            "high",
            "critical",
            "critical",
        ]
        assert "export" in evaluate_degradation(3, cfg).recommendation

    def test_block_auto_compaction(self) -> None:
        assert not should_block_auto_compaction(4, CFG)
        assert should_block_auto_compaction(5, CFG)
        assert should_block_auto_compaction(0, CompactionConfig(auto_enabled=False))


class TestFlush:
    def test_once_per_epoch(self) -> None:
        epoch = None
        flushes = []
        # the trigger fires several times in each epoch (compaction count 0, 1, 2)
        for count in [0, 0, 0, 1, 1, 2, 2, 2]:
            if should_flush(epoch, count):
                flushes.append(count)
                epoch = record_flush(count)
        assert flushes == [0, 1, 2]

    def test_boundaries(self) -> None:
        assert should_flush(None, 0)
        assert should_flush(-1, 0)
        assert not should_flush(3, 3)
        assert should_flush(2, 3)
        assert not should_flush(4, 3)


class TestLoading:
    def test_precedence_toml_then_env_then_overrides(self, tmp_path: Path) -> None:
        path = tmp_path / "nexus.toml"
        path.write_text(
            "[compaction]\n"
            "context_window = 100000\n"
            "keep_recent_tokens = 1000\n"
            "warn_at_compaction = 2\n"
            "[compaction.prune]\n"
            "protect_tokens = 111\n"
            "protected_tools = ['a']\n"
            "[compaction.summarizer]\n"
            "kind = 'openai'\n"
            "model = 'toml-model'\n"
        )
        env = {
            "NEXUS_KEEP_RECENT_TOKENS": "2000",
            "NEXUS_WARN_AT_COMPACTION": "4",
            "NEXUS_PRUNE_PROTECTED_TOOLS": "b, c",
            "NEXUS_SUMMARIZER_MODEL": "env-model",
            "NEXUS_AUTO_COMPACT": "false",
        }
        cfg = load_config(
            path,
            env=env,
            overrides={"warn_at_compaction": 5, "summarizer": {"model": None, "timeout": 9}},
        )
        assert cfg.context_window == 100_000  # TOML
        assert cfg.prune.protect_tokens == 111  # TOML, nested
        assert cfg.keep_recent_tokens == 2000  # env over TOML
        assert cfg.prune.protected_tools == ("b", "c")  # env over TOML, comma list
        assert cfg.auto_enabled is False
        assert cfg.warn_at_compaction == 5  # override over env
        assert cfg.summarizer.model == "env-model"  # a None override does not erase
        assert cfg.summarizer.kind == "openai" and cfg.summarizer.timeout == 9

    def test_config_path_from_environment_and_bare_document(self, tmp_path: Path) -> None:
        path = tmp_path / "c.toml"
        path.write_text("context_window = 64000\nreserve_tokens_floor = 8000\n")
        cfg = load_config(env={"NEXUS_COMPACTION_CONFIG": str(path)})
        assert cfg.context_window == 64_000 and trigger_threshold(cfg) == 52_000

    def test_layers_from_toml(self, tmp_path: Path) -> None:
        path = tmp_path / "c.toml"
        path.write_text(
            "[[compaction.layers]]\nname = 'summarize'\n"
            "trigger_percent = 70\nprotect_recent_tokens = 5\n"
        )
        cfg = load_config(path, env={})
        assert [x.name for x in cfg.layers] == ["summarize"]

    def test_defaults_without_sources(self) -> None:
        assert load_config(env={}) == CFG
        assert CompactionConfig.load(env={}) == CFG

    def test_every_env_var_is_applied(self) -> None:
        values = {
            "NEXUS_CONTEXT_WINDOW": "300000",
            "NEXUS_RESERVE_TOKENS_FLOOR": "1",
            "NEXUS_SOFT_THRESHOLD_TOKENS": "2",
            "NEXUS_KEEP_RECENT_TOKENS": "3",
            "NEXUS_MAX_CHUNK_SHARE": "0.3",
            "NEXUS_SUMMARY_PARTS": "3",
            "NEXUS_AUTO_COMPACT": "0",
            "NEXUS_WARN_AT_COMPACTION": "2",
            "NEXUS_MAX_AUTO_COMPACTIONS": "7",
            "NEXUS_PRUNE": "off",
            "NEXUS_PRUNE_PROTECT_TOKENS": "4",
            "NEXUS_PRUNE_MINIMUM_TOKENS": "5",
            "NEXUS_PRUNE_PROTECTED_TOOLS": "x",
            "NEXUS_PRUNE_PROTECT_USER_TURNS": "1",
            "NEXUS_SUMMARIZER": "openai",
            "NEXUS_SUMMARIZER_BASE_URL": "http://127.0.0.1:1/v1",
            "NEXUS_SUMMARIZER_MODEL": "m",
            "NEXUS_SUMMARIZER_TIMEOUT": "5",
            "NEXUS_SUMMARIZER_MAX_RETRIES": "1",
            "NEXUS_SUMMARIZER_MAX_TOKENS": "100",
        }
        assert set(values) == set(ENV_VARS)
        cfg = load_config(env=values).model_dump()
        assert cfg != CFG.model_dump()
        for name, keys in ENV_VARS.items():
            value = cfg
            for key in keys:
                value = value[key]
            default = CFG.model_dump()
            for key in keys:
                default = default[key]
            assert value != default, name

    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"context_window": 0}, "context_window"),
            (
                {"reserve_tokens_floor": 190_000, "soft_threshold_tokens": 10_000},
                "reserve_tokens_floor",
            ),
            ({"prune": {"protect_tokens": -1}}, "prune.protect_tokens"),
            ({"summarizer": {"kind": "gpt"}}, "summarizer.kind"),
            ({"colour": "red"}, "colour"),
            (
                {"layers": [{"name": "full", "trigger_percent": 120, "protect_recent_tokens": 1}]},
                "layers.0.trigger_percent",
            ),
            (
                {
                    "layers": [
                        {"name": "full", "trigger_percent": 95, "protect_recent_tokens": 1},
                        {"name": "prune", "trigger_percent": 80, "protect_recent_tokens": 1},
                    ]
                },
                "ordered by trigger_percent",
            ),
        ],
    )
    def test_invalid_config_is_a_clear_nexus_error(
        self, overrides: dict[str, object], field: str
    ) -> None:
        with pytest.raises(NexusError) as info:
            load_config(env={}, overrides=overrides)
        message = str(info.value)
        assert message.startswith("invalid compaction config")
        assert field in message
        assert info.value.__cause__ is None

    def test_invalid_env_value_names_the_source(self) -> None:
        with pytest.raises(NexusError, match=r"environment.*context_window"):
            load_config(env={"NEXUS_CONTEXT_WINDOW": "lots"})

    def test_missing_and_malformed_files(self, tmp_path: Path) -> None:
        with pytest.raises(NexusError, match="does not exist"):
            load_config(tmp_path / "nope.toml", env={})
        bad = tmp_path / "bad.toml"
        bad.write_text("context_window = = 3")
        with pytest.raises(NexusError, match="not valid TOML"):
            load_config(bad, env={})
