// How a client connects: its options, and the channel's credentials from its TLS options.
import {
  type ChannelCredentials,
  type ChannelOptions,
  credentials as grpcCredentials,
  type Metadata,
} from "@grpc/grpc-js";

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

export interface CelestialClientOptions {
  /** host:port of the server (any grpc-js target). */
  address: string;
  /** Connect with TLS: true for the system's roots, or the certificates to use. Default: plaintext. */
  tls?: boolean | TlsOptions;
  /** Sent as `authorization: Bearer <apiKey>` with every call. */
  apiKey?: string;
  /** Tenant named in every call; "" (the default) is the API key's tenant, or "default". */
  tenant?: string;
  /** More metadata sent with every call. */
  metadata?: Metadata | Record<string, string>;
  /** Deadline of each method call in ms, retries included; 0 for none. Default 30000. */
  timeoutMs?: number;
  /**
   * Retries of calls that are safe to repeat (see the README), on UNAVAILABLE and on a
   * RESOURCE_EXHAUSTED that carries a RetryInfo delay: a number of retries or a policy.
   * The server's RetryInfo delay, when sent, replaces the backoff. Default 2.
   */
  retries?: number | RetryPolicy;
  /** grpc-js channel options, e.g. `{"grpc.max_receive_message_length": 8 << 20}`. */
  options?: ChannelOptions;
}

function pem(value: Pem | undefined, name: string): Buffer | null {
  if (value === undefined) {
    return null;
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

export function channelCredentials(tls: boolean | TlsOptions | undefined): ChannelCredentials {
  if (!tls) {
    return grpcCredentials.createInsecure();
  }
  const t = tls === true ? {} : tls;
  return grpcCredentials.createSsl(pem(t.ca, "ca"), pem(t.key, "key"), pem(t.cert, "cert"));
}
