/* Lab helper: registers memory regions of known sizes and holds them, so that an exporter
 * started afterwards must find them in the kernel's restrack (issue #18, item 4).
 *
 * usage: mr_holder DEVICE SIZES READY_FILE STEP_FILE STEPPED_FILE DROP EXTRA_SIZES
 *   SIZES, EXTRA_SIZES: comma-separated byte counts.
 * Registers SIZES in order from a thread that then exits, creates READY_FILE; once STEP_FILE
 * exists, deregisters the first DROP of them, registers EXTRA_SIZES and creates STEPPED_FILE;
 * then sleeps until killed. The registering thread is gone before any exporter starts:
 * restrack lists those regions with no pid (nldev.c fill_res_name_pid), so only their PD
 * (allocated by the main thread) tells whose they are. */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_REGIONS 64

static struct ibv_pd* pd;
static struct ibv_mr* regions[MAX_REGIONS];
static int count;

/* Registers every size of a comma-separated list; 0 on success. */
static int register_all(const char* list) {
  char* copy = strdup(list);
  char* size = strtok(copy, ",");
  for (; size; size = strtok(NULL, ",")) {
    const size_t bytes = (size_t)strtoull(size, NULL, 10);
    /* Page-aligned, so that VmPin equals the registered bytes. */
    void* buffer = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
    if (!buffer || count == MAX_REGIONS) break;
    memset(buffer, 0, bytes);
    regions[count] = ibv_reg_mr(pd, buffer, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!regions[count]) {
      perror("ibv_reg_mr");
      break;
    }
    count++;
  }
  const int failed = size != NULL;
  free(copy);
  return failed;
}

static void* register_initial(void* sizes) { return (void*)(long)register_all(sizes); }

static void touch(const char* path) {
  FILE* file = fopen(path, "w");
  if (file) fclose(file);
}

int main(int argc, char** argv) {
  if (argc != 8) {
    fprintf(stderr, "usage: %s DEVICE SIZES READY_FILE STEP_FILE STEPPED_FILE DROP EXTRA_SIZES\n",
            argv[0]);
    return 2;
  }
  int devices = 0;
  struct ibv_device** list = ibv_get_device_list(&devices);
  struct ibv_context* context = NULL;
  for (int i = 0; list && i < devices; i++) {
    if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) context = ibv_open_device(list[i]);
  }
  if (!context || !(pd = ibv_alloc_pd(context))) {
    fprintf(stderr, "cannot open %s\n", argv[1]);
    return 1;
  }
  pthread_t registrar;
  void* failed = NULL;
  if (pthread_create(&registrar, NULL, register_initial, argv[2]) != 0 ||
      pthread_join(registrar, &failed) != 0 || failed) {
    return 1;
  }
  touch(argv[3]);
  while (access(argv[4], F_OK) != 0) usleep(50 * 1000);
  const int drop = atoi(argv[6]);
  for (int i = 0; i < drop && i < count; i++) {
    if (ibv_dereg_mr(regions[i])) {
      perror("ibv_dereg_mr");
      return 1;
    }
  }
  if (register_all(argv[7])) return 1;
  touch(argv[5]);
  for (;;) pause();
}
