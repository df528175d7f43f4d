"""Job files: parsing, variables, links, env, and one clear message per kind of mistake."""

from __future__ import annotations

import subprocess
import sys

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan

SOURCE = 'LocalFile { path = "/tmp/in", file_format_type = "parquet" }'


def job(source: str = SOURCE, transform: str = "", sink: str = "Console {}", env: str = "") -> str:
    return f"env {{ {env} }}\nsource {{\n  {source}\n}}\ntransform {{\n  {transform}\n}}\nsink {{\n  {sink}\n}}\n"


def error_of(text: str, variables: dict | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_job_text(text, variables, source_name="job.conf")
    return info.value


def test_env_defaults_and_spark_keys():
    config = load_job_text(job(env='job.name = "x"\nspark.executor.memory = "1g"'))
    env = config.env
    assert (env.name, env.mode, env.parallelism, env.retry_times, env.retry_interval_s) == ("x", "BATCH", 1, 3, 3)
    assert env.checkpoint_interval_ms is None and not env.micro_batch
    assert env.spark_conf == {"spark.executor.memory": "1g"}   # spark.master: session.DEFAULT_CONF or the worker's
    streaming = load_job_text(job(env="job.mode = STREAMING")).env
    assert streaming.checkpoint_interval_ms == 10000 and streaming.micro_batch


def test_the_progress_watchdog_is_on_for_every_mode_by_default_and_off_with_zero():
    for mode in ("BATCH", "STREAMING"):
        env = load_job_text(job(env=f"job.mode = {mode}")).env
        assert (env.progress_timeout_s, env.on_hung) == (600.0, "restart")
    env = load_job_text(job(env="job.progress-timeout = 4000\njob.on-hung = fail")).env
    assert (env.progress_timeout_s, env.on_hung) == (4.0, "fail")
    assert load_job_text(job(env="job.progress-timeout = 0")).env.progress_timeout_s is None


def test_duplicate_plugin_blocks_are_kept_in_order():
    text = job(source=f'{SOURCE}\n  LocalFile {{ path = "/tmp/b", file_format_type = "json", '
                      'schema = { fields { a = int } }, plugin_output = "b" }',
               sink='Console { plugin_input = "b" }\n  Console { plugin_input = "LocalFile" }')
    with pytest.raises(ConfigError):   # the first source is read by nothing until it is named
        load_job_text(text)
    text = text.replace('file_format_type = "parquet" }', 'file_format_type = "parquet", plugin_output = "a" }')
    text = text.replace('plugin_input = "LocalFile"', 'plugin_input = "a"')
    config = load_job_text(text)
    assert [s.output for s in config.sources] == ["a", "b"]
    assert [s.inputs for s in config.sinks] == [["b"], ["a"]]
    assert [p.pipeline_id for p in build_plan(config).pipelines] == [1, 2]


def test_variables_substitute_anywhere_including_strings():
    config = load_job_text(job(source='LocalFile { path = "${dir}/in", file_format_type = "${fmt}" }'),
                           {"dir": "/data", "fmt": "orc"})
    assert config.sources[0].plugin.opts["path"] == "/data/in"
    assert config.sources[0].plugin.opts["file_format_type"] == "orc"


def test_legacy_link_names_and_implicit_links():
    text = job(source=SOURCE.replace("}", ', result_table_name = "t" }'),
               transform='Sql { source_table_name = "t", result_table_name = "u", query = "select * from t" }',
               sink="Console {}")
    config = load_job_text(text)
    plan = build_plan(config)
    assert plan.pipelines[0].inputs == {"transform[0]": ["source[0]"], "sink[0]": ["transform[0]"]}


def test_json_job_files():
    text = ('{"env": {"job.mode": "BATCH"}, "source": [{"plugin_name": "LocalFile", "path": "/tmp/x", '
            '"file_format_type": "parquet"}], "sink": [{"plugin_name": "Console"}]}')
    assert load_job_text(text).sources[0].name == "LocalFile"


@pytest.mark.parametrize("text, expected", [
    (job(source="FakeSourc { }"), ["job.conf", "source[0]", "unknown source plugin 'FakeSourc'", "line 3"]),
    (job(sink='Console { colour = "red" }', env="strict = true"),
     ["sink[0] Console", "line 9", "unknown option 'colour'", "known options"]),
    (job(source='LocalFile { path = "/x" }'), ["source[0] LocalFile", "required option 'file_format_type'"]),
    (job(sink="Console { log.print.data = maybe }"), ["sink[0] Console", "'log.print.data' must be boolean"]),
    (job(sink='Console { plugin_input = "nope" }'), ["sink[0] Console", "plugin_input 'nope' names nothing"]),
    (job(transform='Sql { plugin_input = "b", plugin_output = "a", query = "select * from b" }\n'
                   '  Sql { plugin_input = "a", plugin_output = "b", query = "select * from a" }',
         sink='Console { plugin_input = "a" }'), ["cycle"]),
    ("env { job.mode = BATCH\nsource {", ["job.conf", "cannot parse"]),
    (job(env="job.mode = SOMETIMES"), ["env", "'job.mode' must be one of BATCH, STREAMING"]),
    (job(env="parallelism = zero"), ["env", "'parallelism' must be integer"]),
    (job(env="job.progress-timeout = -1"), ["env", "'job.progress-timeout' must be 0 or more, got -1"]),
    (job(env="job.on-hung = reboot"), ["env", "'job.on-hung' must be one of warn, restart, fail"]),
    (job(source='LocalFile { path = ${missing}, file_format_type = parquet }'),
     ["variable ${missing} is not defined", "set missing in the environment of the seatide command"]),
    ("env {}\nsink { Console {} }", ["no source"]),
])
def test_each_mistake_gets_one_clear_message(text, expected):
    message = str(error_of(text))
    for fragment in expected:
        assert fragment in message, message


def test_bad_config_exits_2_without_traceback(tmp_path):
    path = tmp_path / "bad.conf"
    path.write_text(job(sink='Console { colour = "red" }'))
    result = subprocess.run([sys.executable, "-m", "seatide.cli.main", "run", str(path), "--strict",
                             "--data-dir", str(tmp_path / "d")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unknown option 'colour'" in result.stderr and "Traceback" not in result.stderr
    missing = subprocess.run([sys.executable, "-m", "seatide.cli.main", "run", str(tmp_path / "nope.conf")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "cannot read the job file" in missing.stderr
