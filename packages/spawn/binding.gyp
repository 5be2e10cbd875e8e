{
  "targets": [
    {
      "target_name": "looprun_spawn",
      "sources": ["src/posix_spawn.c", "src/spawn_child.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
