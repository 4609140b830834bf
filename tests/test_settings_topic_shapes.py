"""Topic shapes from the environment, and the dev stack's shapes for its own traffic plan."""

import pytest

from devstack.stack import plan_topic_shapes
from devstack.traffic import default_plan
from offset_pipeline.settings import topic_shapes
from offset_pipeline.translation.shape import parse_shape


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, {}),
        ("", {}),
        ("orders=two_way", {"orders": "two_way"}),
        (" a=one_way:idc1 , b=50:50,", {"a": "one_way:idc1", "b": "50:50"}),
        ("weird=name=two_way", {"weird=name": "two_way"}),  # the last '=' separates the shape
    ],
)
def test_topic_shapes_from_env(value, expected):
    env = {} if value is None else {"OFFSET_PIPELINE_TOPIC_SHAPES": value}
    assert topic_shapes(env) == expected


@pytest.mark.parametrize("value", ["orders", "orders=sideways", "=two_way", "orders=one_way:"])
def test_bad_topic_shapes_name_the_entry(value):
    with pytest.raises(ValueError, match="OFFSET_PIPELINE_TOPIC_SHAPES entry"):
        topic_shapes({"OFFSET_PIPELINE_TOPIC_SHAPES": value})


def test_dev_stack_shapes_match_its_producers():
    shapes = topic_shapes({"OFFSET_PIPELINE_TOPIC_SHAPES": plan_topic_shapes("p.")})
    plan = default_plan("p.")
    assert set(shapes) == {t.name for t in plan}
    for topic in plan:
        shape = parse_shape(shapes[topic.name])
        if len(topic.producers_on) > 1:
            assert shape == parse_shape("two_way")
        else:
            assert shape == parse_shape(f"one_way:{topic.producers_on[0]}")


def test_translation_config_default_follows_the_environment(monkeypatch):
    from offset_pipeline.assets.translation import TranslationConfig

    monkeypatch.setenv("OFFSET_PIPELINE_TOPIC_SHAPES", "orders=two_way")
    assert TranslationConfig().topic_shapes == {"orders": "two_way"}
    monkeypatch.delenv("OFFSET_PIPELINE_TOPIC_SHAPES")
    assert TranslationConfig().topic_shapes == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, {}),
        ("", {}),
        ("spark.pyspark.python=/opt/py/bin/python", {"spark.pyspark.python": "/opt/py/bin/python"}),
        (" spark.executor.memory = 2g ,spark.cores.max=4,", {"spark.executor.memory": "2g", "spark.cores.max": "4"}),
        ("spark.driver.extraJavaOptions=-Da=b", {"spark.driver.extraJavaOptions": "-Da=b"}),
    ],
)
def test_spark_conf_from_the_environment(value, expected):
    from offset_pipeline.settings import spark_conf_setting

    env = {} if value is None else {"OFFSET_PIPELINE_SPARK_CONF": value}
    assert spark_conf_setting(env) == expected


@pytest.mark.parametrize("value", ["executor.memory=2g", "spark.executor.memory", "spark.cores.max="])
def test_a_malformed_spark_conf_entry_is_named(value):
    from offset_pipeline.settings import spark_conf_setting

    with pytest.raises(ValueError, match="OFFSET_PIPELINE_SPARK_CONF"):
        spark_conf_setting({"OFFSET_PIPELINE_SPARK_CONF": value})
