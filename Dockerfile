# One image for the API and the workers (the command decides which runs).
FROM node:20-bookworm-slim
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ git ca-certificates \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# The spawn addon builds at `npm ci` (its install script needs its sources).
COPY packages/spawn packages/spawn
COPY packages/core/package.json packages/core/
COPY packages/db/package.json packages/db/
COPY apps/api/package.json apps/api/
COPY apps/worker/package.json apps/worker/
COPY apps/cli/package.json apps/cli/
COPY apps/cli/bin apps/cli/bin
RUN npm ci --omit=dev
COPY . .
ENV DATABASE_PATH=/data/looprun.db WORKSPACES_ROOT=/data/workspaces
ENTRYPOINT ["node", "apps/cli/bin/looprun.js"]
