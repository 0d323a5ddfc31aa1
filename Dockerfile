# Production image of the speech service: compiled JavaScript (npm run build), no tsx at run
# time, the Debian packages scripts/setup.sh installs for the engines, a non-root user, and
# DATA_DIR on a volume. Build: docker build -t speech-service .  Run: see compose.yaml.
#
# NODE_IMAGE is Debian bookworm-slim with Node.js 20 (the official node image); both stages use
# it so native modules built or fetched by npm ci (uWebSockets, onnxruntime, koffi, argon2) match.
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.mjs scripts/build.mjs
COPY runtime runtime
COPY actors actors
COPY engines engines
COPY protocol protocol
COPY storage storage
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE}
# Engines that are not on npm (scripts/setup.sh's list): Debian's ffmpeg (decodes uploads, with
# security updates; without it npm's 2018 static build does), espeak-ng's native library (the
# bundled build speaks without it, slower), PocketSphinx for speech-to-text, Apertium and its pairs
# for chunk translation. Missing ones only switch those engines off.
ARG SPEECH_APT_PACKAGES="ffmpeg libespeak-ng1 pocketsphinx libpocketsphinx3 pocketsphinx-en-us apertium apertium-eng-spa apertium-eng-cat apertium-spa-cat apertium-es-pt"
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates ${SPEECH_APT_PACKAGES} \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 speech \
 && useradd --system --uid 10001 --gid speech --home-dir /app --shell /usr/sbin/nologin speech \
 && mkdir -p /data && chown speech:speech /data
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
ENV NODE_ENV=production DATA_DIR=/data HOST=0.0.0.0 PORT=8080
VOLUME ["/data"]
USER speech
EXPOSE 8080
# /readyz: the database answers and the worker pool makes progress (503 otherwise).
HEALTHCHECK --interval=15s --timeout=5s --start-period=90s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/readyz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
STOPSIGNAL SIGTERM
# Admin CLI in a container: docker compose exec speech1 node dist/runtime/admin.js help
CMD ["node", "dist/runtime/main.js"]
