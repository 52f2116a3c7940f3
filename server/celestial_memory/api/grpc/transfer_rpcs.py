"""Export and Import, as a mixin of ``MemoryServicer``: a tenant's memories streamed out and
in, with what the tenant learnt (its ranking layer, its turn policy) on the first message."""

from __future__ import annotations

from collections.abc import AsyncIterator

from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc import converters as cv
from celestial_memory.api.grpc.servicer_parts import Context, ServicerParts
from celestial_memory.api.grpc.status import mapped, mapped_stream
from celestial_memory.domain.requests import Imported
from celestial_memory.errors import InvalidArgument

# Imported memories are validated and written in batches of this many (one write each). A bad
# record stops the import: its batch writes nothing, the batches before it stay written (an id
# already held is skipped, so sending the corrected import again is safe).
IMPORT_BATCH = 512


class TransferRpcs(ServicerParts):
    @mapped_stream
    async def Export(
        self, request: pb.ExportRequest, context: Context
    ) -> AsyncIterator[pb.ExportedMemory]:
        tenant = self._tenant(request.tenant)
        pages = self._service.transfer.export_pages(tenant, request.after_id)
        tuned = policy = None
        if not request.after_id:  # what the tenant learnt goes with its first memory
            tuned = await self._run(context, self._service.tuning.exported, tenant)
            policy = await self._run(context, self._service.observing.policies.exported, tenant)
        while (page := await self._run(context, next, pages, None)) is not None:
            for m in page:
                e = cv.exported_to_pb(m, self._service.breakdown(m))
                if tuned is not None:  # on the first message only
                    e.ranker_tuning.CopyFrom(cv.tuning_to_pb(tuned))
                if policy is not None:
                    e.turn_policy.state = policy
                tuned = policy = None
                yield e

    @mapped
    async def Import(
        self, request_iterator: AsyncIterator[pb.ExportedMemory], context: Context
    ) -> pb.ImportResponse:
        async with self._client_stream("Import", request_iterator, context) as requests:
            return await self._import(requests, context)

    async def _import(
        self, request_iterator: AsyncIterator[pb.ExportedMemory], context: Context
    ) -> pb.ImportResponse:
        tenant: str | None = None
        replace = False
        tuned = policy = None
        batch: list[Imported] = []
        seen = imported = skipped = 0

        async def write() -> None:
            nonlocal imported, skipped
            assert tenant is not None
            wrote, held = await self._run(context, self._service.transfer.import_batch, tenant,
                                          batch, seen - len(batch), replace, cancellable=True)
            imported, skipped = imported + wrote, skipped + held

        async for e in request_iterator:
            if tenant is None:  # the first message decides the tenant and replace
                tenant, replace = self._tenant(e.tenant), e.replace
                tuned = cv.tuning_from_pb(e.ranker_tuning) if e.HasField("ranker_tuning") else None
                policy = e.turn_policy.state if e.HasField("turn_policy") else None
                if policy is not None:  # checked before any memory is written
                    await self._run(context, self._service.observing.policies.read, policy)
            elif e.tenant and self._tenant(e.tenant) != tenant:
                raise InvalidArgument(f"memories[{seen}].tenant", "differs within an import")
            try:
                batch.append(cv.imported_from_pb(e))
            except InvalidArgument as exc:  # named by its place in the whole import
                raise InvalidArgument(f"memories[{seen}].{exc.field}", exc.problem) from None
            seen += 1
            if len(batch) == IMPORT_BATCH:
                await write()
                batch = []
        if batch:
            await write()
        if tenant is not None and tuned is not None:  # once every memory is in
            await self._run(context, self._service.tuning.restore, tenant, tuned)
        if tenant is not None and policy is not None:
            await self._run(context, self._service.observing.policies.restore, tenant, policy,
                            replace)
        return pb.ImportResponse(imported=imported, skipped=skipped)
