"""The memory explorer's static files, served on the HTTP port at ``/explorer`` (api/connect/
server.py). ``explorer.js`` is built from client/typescript/explorer/ (``npm run build:explorer``
there) and checked in, so the server needs no Node.js; a test fails when it is stale."""
