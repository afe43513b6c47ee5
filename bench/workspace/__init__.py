"""The workspace tools a model uses in multi-turn tasks, acting on a fresh copy of a fixture repository.

Pure Python, no shell: the driver executes the model's calls with them while recording, and the scorer re-applies
recorded calls to a fresh copy to rebuild the final state offline. Paths never leave the workspace.
"""

from bench.workspace.patch import PatchError, apply_hunks, parse_patch
from bench.workspace.paths import ToolError
from bench.workspace.registry import TOOLS, tool
from bench.workspace.tool_workspace import WORKSPACE_TOOLS, ToolResult, ToolWorkspace, workspace_tool_schemas

__all__ = [
    "TOOLS",
    "WORKSPACE_TOOLS",
    "PatchError",
    "ToolError",
    "ToolResult",
    "ToolWorkspace",
    "apply_hunks",
    "parse_patch",
    "tool",
    "workspace_tool_schemas",
]
