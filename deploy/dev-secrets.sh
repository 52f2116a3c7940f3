#!/bin/sh
# Development secrets for docker compose, readable by their owner only: an admin API key
# (.secrets/keys.json, the key itself printed once), a self-signed certificate for localhost
# (.secrets/tls/) and a Qdrant API key (QDRANT_API_KEY in .env, kept when already there).
# The service's container does not read these files directly: compose's one-shot "copy-secrets"
# service copies them into a volume owned by the container's user (docker-compose.yml).
#   deploy/dev-secrets.sh [folder]      (default: the current folder; CELESTIAL: the CLI)
set -eu
root=${1:-.}
celestial=${CELESTIAL:-celestial}
umask 077
mkdir -p "$root/.secrets/tls"
chmod 700 "$root/.secrets" "$root/.secrets/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$root/.secrets/tls/server.key" -out "$root/.secrets/tls/server.pem" 2>/dev/null
chmod 600 "$root/.secrets/tls/server.key"
chmod 644 "$root/.secrets/tls/server.pem"  # a certificate is public
$celestial keys --file "$root/.secrets/keys.json" create --name dev --role admin --tenant '*'
chmod 600 "$root/.secrets/keys.json"
if ! grep -qs '^QDRANT_API_KEY=.' "$root/.env"; then
    echo "QDRANT_API_KEY=$(openssl rand -hex 24)" >> "$root/.env"
fi
chmod 600 "$root/.env"
