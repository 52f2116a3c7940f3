// How a client connects: its options, and the gRPC transport (Connect over HTTP/2) they make.
import type * as http2 from "node:http2";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

/** PEM text or its bytes. */
export type Pem = string | Buffer;

export interface TlsOptions {
  /** The CA that signed the server's certificate; absent: the system's roots. */
  ca?: Pem;
  /** This client's certificate chain, for a server that asks for one (mTLS). */
  cert?: Pem;
  /** The private key of `cert`. */
  key?: Pem;
  /** The name to check the server's certificate against, when it is not the address's host. */
  serverName?: string;
}

export interface RetryPolicy {
  /** Retries after the first attempt; 0 turns retrying off. */
  maxRetries: number;
  /** The first backoff, doubled on each retry (with jitter); default 100. */
  initialBackoffMs?: number;
  /** The longest backoff; default 5000. */
  maxBackoffMs?: number;
}

/**
 * Options of the gRPC transport (`createGrpcTransport` of `@connectrpc/connect-node`), e.g.
 * `{ readMaxBytes: 8 << 20 }`, `interceptors`, or HTTP/2 keepalive pings (`pingIntervalMs`).
 */
export interface TransportOptions {
  /** Interceptors of every call (and every retry), outermost first. */
  interceptors?: Interceptor[];
  /** The largest message received, in bytes; default 4 GiB - 1. */
  readMaxBytes?: number;
  /** The largest message sent, in bytes; default 4 GiB - 1. */
  writeMaxBytes?: number;
  /** HTTP/2 PING frames this often (ms) to keep the connection alive; default none. */
  pingIntervalMs?: number;
  /** How long to wait for a PING's answer (ms) before closing the connection; default 15000. */
  pingTimeoutMs?: number;
  /** Also ping while no call is in flight. */
  pingIdleConnection?: boolean;
  /** Close the connection after this long (ms) without a call; default 15 minutes. */
  idleConnectionTimeoutMs?: number;
  /** More options of the HTTP/2 connection (`http2.connect`), e.g. `localAddress`. */
  nodeOptions?: http2.ClientSessionOptions | http2.SecureClientSessionOptions;
}

export interface CelestialClientOptions {
  /** host:port of the server (also "dns:host:port", or an http:// or https:// URL). */
  address: string;
  /** Connect with TLS: true for the system's roots, or the certificates to use. Default: plaintext. */
  tls?: boolean | TlsOptions;
  /** Sent as `authorization: Bearer <apiKey>` with every call. */
  apiKey?: string;
  /** Tenant named in every call; "" (the default) is the API key's tenant, or "default". */
  tenant?: string;
  /** More metadata (request headers) sent with every call. */
  metadata?: Headers | Record<string, string>;
  /** Deadline of each method call in ms, retries included; 0 for none. Default 30000. */
  timeoutMs?: number;
  /**
   * Retries of calls that are safe to repeat (see the README), on UNAVAILABLE and on a
   * RESOURCE_EXHAUSTED that carries a RetryInfo delay: a number of retries or a policy.
   * The server's RetryInfo delay, when sent, replaces the backoff. Default 2.
   */
  retries?: number | RetryPolicy;
  /** Options of the gRPC transport, e.g. `{ readMaxBytes: 8 << 20 }`. */
  options?: TransportOptions;
}

function pem(value: Pem | undefined, name: string): Buffer | undefined {
  if (value === undefined) {
    return undefined;
  }
  if (typeof value === "string") {
    // A path passed for PEM text would otherwise fail later with an opaque TLS error.
    if (!value.includes("-----BEGIN")) {
      throw new TypeError(`tls.${name} is PEM text or a Buffer; read a file with fs.readFileSync`);
    }
    return Buffer.from(value);
  }
  return value;
}

/** The base URL of an address: http:// for plaintext, https:// with TLS. */
export function baseUrl(address: string, tls: boolean): string {
  if (/^https?:\/\//.test(address)) {
    if (address.startsWith("https://") !== tls) {
      throw new TypeError(`address ${address} and the tls option disagree`);
    }
    return address;
  }
  const hostPort = address.replace(/^dns:(\/\/[^/]*\/)?/, "");
  if (!/^(\[[0-9a-fA-F:.]+\]|[^:/[\]]+):\d+$/.test(hostPort)) {
    throw new TypeError(`address ${JSON.stringify(address)} is not host:port`);
  }
  return `${tls ? "https" : "http"}://${hostPort}`;
}

/** The transport of a client, and the HTTP/2 connection it holds (to close it). */
export function grpcTransport(
  o: CelestialClientOptions,
): { transport: Transport; session: Http2SessionManager } {
  const { interceptors, readMaxBytes, writeMaxBytes, nodeOptions, ...ping } = o.options ?? {};
  const url = baseUrl(o.address, Boolean(o.tls));
  let connect: http2.ClientSessionOptions | http2.SecureClientSessionOptions = { ...nodeOptions };
  if (o.tls) {
    const t = o.tls === true ? {} : o.tls;
    connect = {
      ...connect, ca: pem(t.ca, "ca"), cert: pem(t.cert, "cert"), key: pem(t.key, "key"),
      ...(t.serverName ? { servername: t.serverName } : {}),
    };
  }
  const session = new Http2SessionManager(url, ping, connect);
  const transport = createGrpcTransport({
    baseUrl: url, sessionManager: session, interceptors, readMaxBytes, writeMaxBytes,
  });
  return { transport, session };
}
