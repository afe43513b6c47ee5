"""The OpenTelemetry GenAI semantic conventions bench follows, by name, in one place (docs/export.md).

Version: Semantic Conventions v1.41.1, the last release in which the GenAI conventions are current. From v1.42 the
core repository marks them moved to open-telemetry/semantic-conventions-genai, which has published no release yet;
the names below are unchanged there so far. tests/scorer/export/test_genai_names.py holds every name to the constants
of the `opentelemetry-semantic-conventions` package and the schema URL to its list of versions, so a rename fails.
"""

from __future__ import annotations

SEMCONV_VERSION = "1.41.1"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# Span attributes (gen_ai_attributes, server_attributes, error_attributes).
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_SEED = "gen_ai.request.seed"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CONVERSATION_ID = "gen_ai.conversation.id"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
TOKEN_TYPE = "gen_ai.token.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

# Metrics (gen_ai_metrics): histograms, with the explicit bucket boundaries the conventions advise.
TOKEN_USAGE = "gen_ai.client.token.usage"
OPERATION_DURATION = "gen_ai.client.operation.duration"
TIME_TO_FIRST_TOKEN = "gen_ai.server.time_to_first_token"
TIME_PER_OUTPUT_TOKEN = "gen_ai.server.time_per_output_token"
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)

# Well-known values.
PROVIDER_OPENAI = "openai"  # the API spoken: every endpoint bench parses is OpenAI's
OPERATIONS = {
    "chat.completions": "chat",
    "responses": "chat",
    "completions": "text_completion",
    "embeddings": "embeddings",
}
INVOKE_AGENT = "invoke_agent"
TOKEN_INPUT = "input"
TOKEN_OUTPUT = "output"

SPAN_ATTRIBUTES = (
    OPERATION_NAME,
    PROVIDER_NAME,
    REQUEST_MODEL,
    REQUEST_TEMPERATURE,
    REQUEST_MAX_TOKENS,
    REQUEST_SEED,
    RESPONSE_MODEL,
    RESPONSE_ID,
    RESPONSE_FINISH_REASONS,
    USAGE_INPUT_TOKENS,
    USAGE_OUTPUT_TOKENS,
    CONVERSATION_ID,
    INPUT_MESSAGES,
    OUTPUT_MESSAGES,
    SYSTEM_INSTRUCTIONS,
    TOOL_DEFINITIONS,
    TOKEN_TYPE,
)
METRICS = (TOKEN_USAGE, OPERATION_DURATION, TIME_TO_FIRST_TOKEN, TIME_PER_OUTPUT_TOKEN)
