"""LangChain: a retriever over the memory's recall, and the memory's tools
(``agent_tools.TOOLS``) as LangChain tools. Needs the ``langchain`` extra.

    retriever = CelestialRetriever(client=client, k=5)
    docs = retriever.invoke("what does Alice drink?")  # zone, relevance, breakdown in metadata
    tools = memory_tools(client)                        # for create_agent / bind_tools
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import StructuredTool, ToolException
from pydantic import ConfigDict

from celestial_client.agent_tools import TOOLS, ToolArgumentError, ToolSpec, call_tool, result_data
from celestial_client.client import CelestialClient
from celestial_client.errors import CelestialClientError


class CelestialRetriever(BaseRetriever):
    """The ``k`` most relevant memories as Documents: the content as ``page_content``; the id,
    zone, relevance, score breakdown, tags and times in ``metadata``. ``options`` are recall's
    (filters, ``reinforce``, ``include_archived``, ...)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: CelestialClient
    k: int = 10
    options: dict[str, Any] = {}  # noqa: RUF012 (pydantic copies field defaults)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        docs = []
        for r in self.client.recall(query, self.k, **self.options):
            meta = result_data(r)
            docs.append(Document(page_content=meta.pop("content"), metadata=meta, id=r.memory.id))
        return docs

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return await asyncio.to_thread(self._get_relevant_documents, query,
                                       run_manager=run_manager.get_sync())


def _tool(client: CelestialClient, spec: ToolSpec) -> StructuredTool:
    def run(**arguments: Any) -> tuple[str, dict[str, Any]]:
        try:
            out = call_tool(client, spec.name, arguments)
        except ToolArgumentError as err:
            raise ToolException(str(err)) from None
        except CelestialClientError as err:
            raise ToolException(f"{err.code.name}: {err.details}") from None
        return out.text, out.data

    async def arun(**arguments: Any) -> tuple[str, dict[str, Any]]:
        return await asyncio.to_thread(run, **arguments)

    # The text goes to the model; the structured data rides along as the tool message's artifact.
    return StructuredTool.from_function(
        func=run, coroutine=arun, name=spec.name, description=spec.description,
        args_schema=spec.parameters, response_format="content_and_artifact",
        handle_tool_error=True)


def memory_tools(client: CelestialClient) -> list[StructuredTool]:
    """The memory's tools, calling ``client``. A failing call answers its message as the tool's
    result (``handle_tool_error``), so the agent can correct itself."""
    return [_tool(client, spec) for spec in TOOLS]
