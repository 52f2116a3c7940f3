// A made-up MemoryService in this process, served over gRPC (HTTP/2 without TLS) by Connect's
// Node adapter: what the offline tests point a client at.
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { MemoryService } from "../src/gen/celestial/v1/memory_pb.js";

export type Impl = Partial<ServiceImpl<typeof MemoryService>>;

export interface FakeServer {
  /** host:port to connect to. */
  address: string;
  close(): Promise<void>;
}

/** Serves `impl` on a free port of 127.0.0.1; a method it lacks answers UNIMPLEMENTED. */
export async function fakeServer(impl: Impl): Promise<FakeServer> {
  const server = http2.createServer(connectNodeAdapter({
    grpc: true, grpcWeb: false, connect: false,
    routes: (router) => router.service(MemoryService, impl),
  }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  return {
    address: `127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => {
      sessions.forEach((s) => s.destroy());
      server.close(() => resolve());
    }),
  };
}

/** A Date as the Timestamp a message holds. */
export function ts(d: Date): Timestamp {
  return timestampFromDate(d);
}
