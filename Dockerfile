# syntax=docker/dockerfile:1
# The gateway + controller image (codemode.local/gateway:v1 in the test cluster). CI builds the
# same image without Docker (test/cluster/images/build.sh gateway); test/unit/images.test.ts
# checks that both agree on base, Node version, packages, user, workdir, env and entrypoint.
#
#   docker build -t registry.example.com/codemode/gateway:v1 .
#
# Node is the version package-lock.json pins for npm's `node` package (what the builder ships).
ARG NODE_VERSION=22.23.3
ARG DEBIAN_SUITE=bookworm

# ---- build: compile TypeScript (dev dependencies needed) ---------------------------------------
FROM node:${NODE_VERSION}-${DEBIAN_SUITE}-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the `node` devDependency would download a second Node; the image has one.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
RUN npx tsc -p tsconfig.build.json && test -f dist/src/entry.js

# ---- deps: production node_modules only --------------------------------------------------------
FROM node:${NODE_VERSION}-${DEBIAN_SUITE}-slim AS deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# ---- runtime: Debian + Node binary + app, no npm, no compiler, no shell tools beyond the base --
FROM debian:${DEBIAN_SUITE}-slim
# Node from npm's `node` package is a glibc binary that needs libstdc++; CA certificates for HTTPS.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libstdc++6 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /usr/share/doc/* /usr/share/man/*
COPY --from=build /usr/local/bin/node /usr/local/bin/node
# Root-owned and not writable by the runtime user: the app needs no writable path, so the pod
# runs with readOnlyRootFilesystem (logs go to stdout).
COPY --from=build --chown=0:0 /src/dist /app/dist
# The session kernels the operator ships to sandbox pods in a ConfigMap.
COPY --chown=0:0 runtime /app/runtime
COPY --from=deps --chown=0:0 /src/package.json /app/package.json
COPY --from=deps --chown=0:0 /src/node_modules /app/node_modules
RUN chmod -R a+rX,go-w /app
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENV NODE_ENV=production
WORKDIR /app
USER 65534:65534
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/node", "/app/dist/src/entry.js"]
