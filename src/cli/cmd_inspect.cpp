// reap inspect: placeholder until the GGUF library lands.
#include <cstdio>
int cmd_inspect(int, char **) { fprintf(stderr, "inspect: not built yet\n"); return 1; }
