"""Every GenAI name bench writes is the OpenTelemetry semantic conventions' own, as the
`opentelemetry-semantic-conventions` package generates them, and the version bench names is one it knows: a name
that drifts (renamed, removed) fails here."""

from __future__ import annotations

from opentelemetry.semconv import schemas
from opentelemetry.semconv._incubating.attributes import error_attributes, gen_ai_attributes, server_attributes
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics

from bench.scorer.export import genai
from tests.support.doc_tables import ROOT


def _constants(*modules: object) -> set[str]:
    return {v for m in modules for k, v in vars(m).items() if k.isupper() and isinstance(v, str)}


def test_every_span_attribute_is_a_semconv_attribute() -> None:
    known = _constants(gen_ai_attributes, server_attributes, error_attributes)
    names = [*genai.SPAN_ATTRIBUTES, genai.SERVER_ADDRESS, genai.SERVER_PORT, genai.ERROR_TYPE]
    assert [n for n in names if n not in known] == []
    # The ones the spans are read by, constant by constant.
    assert genai.OPERATION_NAME == gen_ai_attributes.GEN_AI_OPERATION_NAME
    assert genai.PROVIDER_NAME == gen_ai_attributes.GEN_AI_PROVIDER_NAME
    assert genai.USAGE_INPUT_TOKENS == gen_ai_attributes.GEN_AI_USAGE_INPUT_TOKENS
    assert genai.USAGE_OUTPUT_TOKENS == gen_ai_attributes.GEN_AI_USAGE_OUTPUT_TOKENS
    assert genai.RESPONSE_FINISH_REASONS == gen_ai_attributes.GEN_AI_RESPONSE_FINISH_REASONS
    assert genai.CONVERSATION_ID == gen_ai_attributes.GEN_AI_CONVERSATION_ID


def test_every_metric_is_a_semconv_metric_and_the_values_are_well_known() -> None:
    assert set(genai.METRICS) <= _constants(gen_ai_metrics)
    operations = gen_ai_attributes.GenAiOperationNameValues
    assert {operations.CHAT.value, operations.TEXT_COMPLETION.value, operations.EMBEDDINGS.value} == set(
        genai.OPERATIONS.values()
    )
    assert operations.INVOKE_AGENT.value == genai.INVOKE_AGENT
    assert gen_ai_attributes.GenAiProviderNameValues.OPENAI.value == genai.PROVIDER_OPENAI
    types = gen_ai_attributes.GenAiTokenTypeValues
    assert (types.INPUT.value, types.OUTPUT.value) == (genai.TOKEN_INPUT, genai.TOKEN_OUTPUT)


def test_the_version_followed_is_a_released_schema_and_the_one_the_docs_name() -> None:
    assert genai.SCHEMA_URL in {s.value for s in schemas.Schemas}
    assert f"Semantic Conventions v{genai.SEMCONV_VERSION}" in (ROOT / "docs" / "export.md").read_text()
