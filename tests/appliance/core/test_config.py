"""Tests for appliance.config: TOML + APPLIANCE_* environment overrides, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from appliance.core.config import AppConfig, ConfigError, load_config


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "appliance.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(**kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(**kwargs)
    message = str(info.value)
    assert "\n" not in message, f"config error must be one line, got: {message!r}"
    return message


# --- defaults ---------------------------------------------------------------------------


def test_defaults_without_file_or_env():
    cfg = load_config(environ={})
    assert isinstance(cfg, AppConfig)
    assert cfg.profile == "cpu"
    assert cfg.server.host == "127.0.0.1"
    assert cfg.server.port == 7860
    assert cfg.paths.data_dir == Path("data")
    assert cfg.engine.backend == "embedded"
    assert cfg.engine.max_new_tokens == 256
    assert cfg.rag.chunk_tokens == 256
    assert cfg.rag.chunk_overlap_tokens == 32
    assert cfg.security.environment == "development"
    assert cfg == AppConfig()


def test_unrelated_environment_variables_are_ignored():
    cfg = load_config(environ={"HOME": "/root", "PATH": "/usr/bin", "SERVER__PORT": "1"})
    assert cfg == AppConfig()


# --- TOML file --------------------------------------------------------------------------


def test_toml_file_values(tmp_path):
    path = _write(
        tmp_path,
        """
profile = "h100"

[server]
host = "0.0.0.0"
port = 9000

[engine]
backend = "sglang"
max_new_tokens = 512

[rag]
chunk_tokens = 128
chunk_overlap_tokens = 16
top_k = 8
""",
    )
    cfg = load_config(path, environ={})
    assert cfg.profile == "h100"
    assert cfg.server.host == "0.0.0.0"
    assert cfg.server.port == 9000
    assert cfg.engine.backend == "sglang"
    assert cfg.engine.max_new_tokens == 512
    assert (cfg.rag.chunk_tokens, cfg.rag.chunk_overlap_tokens, cfg.rag.top_k) == (128, 16, 8)
    # untouched sections keep their defaults
    assert cfg.chat == AppConfig().chat


def test_config_path_from_appliance_config_env(tmp_path):
    path = _write(tmp_path, "[server]\nport = 9100\n")
    cfg = load_config(environ={"APPLIANCE_CONFIG": str(path)})
    assert cfg.server.port == 9100


def test_missing_file_is_config_error(tmp_path):
    message = _error(path=tmp_path / "nope.toml", environ={})
    assert "nope.toml" in message


def test_invalid_toml_is_config_error(tmp_path):
    path = _write(tmp_path, "[server\nport = = 1\n")
    message = _error(path=path, environ={})
    assert "invalid TOML" in message
    assert str(path) in message


# --- environment overrides --------------------------------------------------------------


def test_env_override_is_coerced_to_int():
    cfg = load_config(environ={"APPLIANCE_SERVER__PORT": "8080"})
    assert cfg.server.port == 8080
    assert isinstance(cfg.server.port, int)


def test_env_overrides_beat_toml_and_explicit_overrides_beat_env(tmp_path):
    path = _write(tmp_path, '[server]\nport = 9000\nhost = "0.0.0.0"\n')
    env = {"APPLIANCE_SERVER__PORT": "8080", "APPLIANCE_ENGINE__MAX_NEW_TOKENS": "64"}
    cfg = load_config(path, environ=env)
    assert cfg.server.port == 8080
    assert cfg.server.host == "0.0.0.0"  # from TOML, not overridden
    assert cfg.engine.max_new_tokens == 64

    cfg = load_config(path, environ=env, overrides={"server": {"port": 1234}})
    assert cfg.server.port == 1234
    assert cfg.engine.max_new_tokens == 64


def test_env_override_top_level_and_bool():
    cfg = load_config(
        environ={"APPLIANCE_PROFILE": "h200", "APPLIANCE_DATABASE__ECHO": "true"},
    )
    assert cfg.profile == "h200"
    assert cfg.database.echo is True


# --- errors name the key, on one line ---------------------------------------------------


def test_unknown_key_in_toml_names_the_key(tmp_path):
    path = _write(tmp_path, "[engine]\nbogus = 1\n")
    message = _error(path=path, environ={})
    assert "engine.bogus" in message
    assert "unknown key" in message


def test_unknown_section_in_toml_names_the_key(tmp_path):
    path = _write(tmp_path, "[nonsense]\nx = 1\n")
    message = _error(path=path, environ={})
    assert "nonsense" in message
    assert "unknown key" in message


@pytest.mark.parametrize("value", ["abc", "70000", "-1"])
def test_bad_port_from_env_names_server_port(value):
    message = _error(environ={"APPLIANCE_SERVER__PORT": value})
    assert "server.port" in message
    assert repr(value) in message  # the offending value is shown


def test_bad_port_from_toml_names_server_port(tmp_path):
    path = _write(tmp_path, '[server]\nport = "abc"\n')
    message = _error(path=path, environ={})
    assert "server.port" in message
    assert str(path) in message


def test_bad_port_70000_from_toml(tmp_path):
    path = _write(tmp_path, "[server]\nport = 70000\n")
    message = _error(path=path, environ={})
    assert "server.port" in message
    assert "65535" in message


def test_unknown_env_key_names_the_key():
    message = _error(environ={"APPLIANCE_ENGINE__NOPE": "1"})
    assert "engine.nope" in message
    assert "unknown key" in message


def test_multiple_errors_still_one_line():
    message = _error(
        environ={"APPLIANCE_SERVER__PORT": "abc", "APPLIANCE_ENGINE__NOPE": "1"},
    )
    assert "more" in message


# --- semantic validation ----------------------------------------------------------------


def test_legacy_secret_key_is_ignored_with_a_warning(tmp_path, caplog):
    # what installers before secret_key was dropped wrote into /etc/appliance/appliance.toml
    path = _write(
        tmp_path,
        '[security]\nenvironment = "production"\nsecret_key = "s3cr3t-from-the-installer"\n'
        "session_ttl_hours = 8\n",
    )
    with caplog.at_level("WARNING", logger="appliance.core.config"):
        cfg = load_config(path, environ={})
    assert cfg.security.environment == "production" and cfg.security.session_ttl_hours == 8
    assert not hasattr(cfg.security, "secret_key")
    assert cfg == load_config(
        environ={
            "APPLIANCE_SECURITY__ENVIRONMENT": "production",
            "APPLIANCE_SECURITY__SESSION_TTL_HOURS": "8",
        }
    )
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "security.secret_key" in warned[0] and "ignored" in warned[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="appliance.core.config"):
        load_config(environ={"APPLIANCE_SECURITY__SECRET_KEY": "x"})  # the env override too
    assert any("security.secret_key" in r.getMessage() for r in caplog.records)
    assert "security.secret: unknown key" in _error(environ={"APPLIANCE_SECURITY__SECRET": "x"})


def test_production_needs_no_secret():
    cfg = load_config(environ={"APPLIANCE_SECURITY__ENVIRONMENT": "production"})
    assert cfg.security.environment == "production"


@pytest.mark.parametrize("overlap", [64, 100])
def test_chunk_overlap_not_below_chunk_size_is_refused(overlap):
    message = _error(
        environ={
            "APPLIANCE_RAG__CHUNK_TOKENS": "64",
            "APPLIANCE_RAG__CHUNK_OVERLAP_TOKENS": str(overlap),
        }
    )
    assert "rag" in message
    assert "chunk_overlap_tokens" in message


def test_chunk_overlap_just_below_chunk_size_is_accepted():
    cfg = load_config(
        environ={"APPLIANCE_RAG__CHUNK_TOKENS": "64", "APPLIANCE_RAG__CHUNK_OVERLAP_TOKENS": "63"}
    )
    assert (cfg.rag.chunk_tokens, cfg.rag.chunk_overlap_tokens) == (64, 63)


# --- immutability and derived values ----------------------------------------------------


def test_config_objects_are_immutable():
    cfg = load_config(environ={})
    with pytest.raises(ValidationError):
        cfg.server.port = 1
    with pytest.raises(ValidationError):
        cfg.profile = "h100"
    with pytest.raises(ValidationError):
        cfg.server = cfg.server.model_copy()
    assert cfg.server.port == 7860
    assert cfg.profile == "cpu"


def test_database_url_defaults_to_sqlite_under_data_dir(tmp_path):
    data_dir = tmp_path / "appdata"
    cfg = load_config(environ={"APPLIANCE_PATHS__DATA_DIR": str(data_dir)})
    assert cfg.paths.data_dir == data_dir
    expected = (data_dir / "appliance.db").resolve()
    assert cfg.database_url == f"sqlite:///{expected}"
    assert cfg.paths.models_dir == data_dir / "models"
    assert cfg.paths.index_dir == data_dir / "index"


def test_database_url_relative_data_dir_is_resolved():
    cfg = load_config(environ={})
    url = cfg.database_url
    assert url.startswith("sqlite:///")
    db_path = Path(url.removeprefix("sqlite:///"))
    assert db_path.is_absolute()
    assert db_path == (Path("data") / "appliance.db").resolve()


def test_explicit_database_url_is_used_verbatim():
    url = "postgresql+psycopg://app:pw@localhost:5432/appliance"
    cfg = load_config(environ={"APPLIANCE_DATABASE__URL": url})
    assert cfg.database_url == url


def test_the_draft_pool_is_sized_by_the_config_and_can_be_switched_off():
    from appliance.wiring.appliance import embedded_speculation
    from engine.embedded.speculative import SpeculativeConfig

    config = load_config(environ={})
    assert config.engine.speculative_pool_tokens == SpeculativeConfig().pool_tokens == 32768
    assert embedded_speculation(config) == SpeculativeConfig()
    config = load_config(environ={"APPLIANCE_ENGINE__SPECULATIVE_POOL_TOKENS": "0"})
    spec = embedded_speculation(config)
    assert spec.pool_tokens == 0 and spec.enabled
    with pytest.raises(ConfigError, match="speculative_pool_tokens"):
        load_config(environ={"APPLIANCE_ENGINE__SPECULATIVE_POOL_TOKENS": "-1"})
