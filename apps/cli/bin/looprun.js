#!/usr/bin/env node
// looprun runs its TypeScript sources directly through tsx: no build step to forget.
import { register } from "tsx/esm/api";

register();
await import("../src/main.ts");
