"""The connected-memory methods of the servicer (Relate, Unrelate, Related, Entities): a mixin
of ``MemoryServicer``, the same thin translation over the service's relations and entities
(graph/)."""

from __future__ import annotations

from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc import converters as cv
from celestial_memory.api.grpc.servicer_parts import Context, ServicerParts
from celestial_memory.api.grpc.status import mapped
from celestial_memory.domain import paging
from celestial_memory.domain.paging import PageSize

RELATED_PAGE = PageSize(50, 500)
RELATED_CHUNK = 50  # memories of a page read and converted at once
ENTITIES_PAGE = PageSize(100, 1000)


class GraphRpcs(ServicerParts):
    @mapped
    async def Relate(self, request: pb.RelateRequest, context: Context) -> pb.RelateResponse:
        weight = request.weight if request.HasField("weight") else None
        edge, created = await self._run(context, self._service.relations.relate,
                                        self._tenant(request.tenant), request.from_id,
                                        request.to_id, request.relation, weight)
        return pb.RelateResponse(created=created, relation=cv.relation_to_pb(edge))

    @mapped
    async def Unrelate(self, request: pb.UnrelateRequest, context: Context) -> pb.UnrelateResponse:
        n = await self._run(context, self._service.relations.unrelate,
                            self._tenant(request.tenant), request.from_id, request.to_id,
                            request.relation)
        return pb.UnrelateResponse(removed=n)

    @mapped
    async def Related(self, request: pb.RelatedRequest, context: Context) -> pb.RelatedResponse:
        """A page of the walk, its memories read and converted RELATED_CHUNK at a time until the
        page or its bytes are full: what one call holds is bounded by the message limit, not
        by how many relations the memories carry."""
        tenant = self._tenant(request.tenant)
        size = RELATED_PAGE.of(request.page_size)
        bound = paging.fingerprint(request, tenant)
        start = paging.decode_offset(request.page_token, bound)
        budget = self._page_budget()
        page: list[pb.RelatedMemory] = []
        used, after, total = 0, start, start + 1  # total is known once the first chunk is read
        while after < min(start + size, total) and used <= budget:
            n = min(RELATED_CHUNK, start + size - after)
            entries, total = await self._run(context, self._service.related, tenant, request.id,
                                             request.depth, list(request.relations), after, n)
            nxt = min(after + n, total)  # past the chunk (a memory erased meanwhile is skipped)
            for i, m, r in entries:
                item = pb.RelatedMemory(memory=self._memory(m), path=[
                    pb.Hop(from_id=h.source, to_id=h.target, relation=h.relation,
                           weight=h.weight) for h in r.path])
                used += item.ByteSize() + 6  # its tag and length prefix (paging.fitting)
                if used > budget and page:
                    nxt = i  # the first that does not fit opens the next page
                    break
                page.append(item)
            after = max(after, nxt)
        return pb.RelatedResponse(memories=page, next_page_token=paging.encode_offset(
            bound, after) if after < total else "")

    @mapped
    async def Entities(self, request: pb.EntitiesRequest, context: Context) -> pb.EntitiesResponse:
        tenant = self._tenant(request.tenant)
        if request.entity:
            p = await self._run(context, self._service.entity_profile, tenant, request.entity)
            return pb.EntitiesResponse(profile=pb.EntityProfile(
                entity=cv.entity_to_pb(p.entity), first_seen=cv.ts_to_pb(p.first_seen),
                last_seen=cv.ts_to_pb(p.last_seen),
                most_recalled=[self._memory(m) for m in p.most_recalled],
                summary=p.summary.content if p.summary else "",
                summary_id=p.summary.id if p.summary else ""))
        size = ENTITIES_PAGE.of(request.page_size)
        bound = paging.fingerprint(request, tenant)
        start = paging.decode_offset(request.page_token, bound)
        listed = await self._run(context, self._service.entities.listed, tenant)
        page = [cv.entity_to_pb(e) for e in listed[start:start + size]]
        n = paging.fitting(page, self._page_budget())
        more = start + n < len(listed)
        return pb.EntitiesResponse(entities=page[:n], next_page_token=paging.encode_offset(
            bound, start + n) if more else "")
