/* Benchmark helper (issue #17): the client's floor. Serves one fixed body from memory (the
 * exporter's captured output, so the same series and bytes) on any GET path, gzipped once at
 * start as the exporter does it (level 1, gzip wrapper), so that what a scraper measures against
 * it is the client's own cost plus the network: no collecting, serialising or compressing.
 * Single-threaded epoll, HTTP/1.1 keep-alive (Connection: close honoured), pipelining, one
 * send() per response. Runs until SIGTERM or SIGINT (exit 0).
 *
 * Usage: serve_static BODY_FILE LISTEN_ADDRESS (e.g. 127.0.0.1:19637) */
#define _GNU_SOURCE /* accept4, strcasestr, memmem */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

/* A request's headers beyond this are not a scraper's: the connection is dropped. */
enum { MAX_HEADERS = 64 * 1024, READ_CHUNK = 16 * 1024 };

struct buffer {
  char* data;
  size_t len;
};

/* Responses built once: [gzip][close]. */
static struct buffer responses[2][2];
static const char not_allowed[] =
    "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

struct conn {
  int fd;
  struct buffer in;  /* bytes read, not yet a whole request */
  struct buffer out; /* the unsent rest of responses, only after a short send */
  size_t out_sent;
  int close_after; /* close once `out` is sent: Connection: close or 405 */
  uint32_t events; /* what epoll watches: EPOLLIN | EPOLLRDHUP, or EPOLLOUT */
};

static void die(const char* what) {
  fprintf(stderr, "serve_static: %s: %s\n", what, strerror(errno));
  exit(1);
}

static int append(struct buffer* b, const void* data, size_t len) {
  if (len == 0) return 0;
  char* grown = realloc(b->data, b->len + len);
  if (grown == NULL) return -1; /* b->data is still the caller's to free */
  b->data = grown;
  memcpy(b->data + b->len, data, len);
  b->len += len;
  return 0;
}

static int read_file(const char* path, struct buffer* b) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return -1;
  char chunk[READ_CHUNK];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (append(b, chunk, n) != 0) break;
  }
  int failed = ferror(f) || !feof(f);
  fclose(f);
  return failed ? -1 : 0;
}

/* Gzip (level 1, gzip wrapper, memLevel 9: the exporter's settings) the whole body at once. */
static int gzip_body(const struct buffer* plain, struct buffer* out) {
  z_stream z = {0};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
  uLong bound = deflateBound(&z, (uLong)plain->len);
  out->data = malloc(bound);
  z.next_in = (Bytef*)plain->data;
  z.avail_in = (uInt)plain->len;
  z.next_out = (Bytef*)out->data;
  z.avail_out = (uInt)bound;
  int rc = out->data != NULL ? deflate(&z, Z_FINISH) : Z_MEM_ERROR;
  out->len = z.total_out;
  deflateEnd(&z);
  return rc == Z_STREAM_END ? 0 : -1;
}

static void build_response(struct buffer* r, const struct buffer* body, int gzip, int closing) {
  char head[512];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                   "Content-Length: %zu\r\n%s%s\r\n",
                   body->len, gzip ? "Content-Encoding: gzip\r\n" : "",
                   closing ? "Connection: close\r\n" : "");
  if (append(r, head, (size_t)n) != 0 || append(r, body->data, body->len) != 0) die("malloc");
}

/* "host:port" or "[v6]:port" to a listening, non-blocking socket. */
static int listen_on(const char* address) {
  const char* colon = strrchr(address, ':');
  if (colon == NULL || colon[1] == '\0') return -1;
  char host[256];
  const char* start = address;
  size_t len = (size_t)(colon - address);
  if (len >= 2 && address[0] == '[' && address[len - 1] == ']') start++, len -= 2;
  if (len == 0 || len >= sizeof host) return -1;
  memcpy(host, start, len);
  host[len] = '\0';
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
  struct addrinfo* ai;
  if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) return -1;
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
    freeaddrinfo(ai);
    die(address);
  }
  freeaddrinfo(ai);
  return fd;
}

static void close_conn(struct conn* c) {
  close(c->fd); /* also removes it from the epoll set */
  free(c->in.data);
  free(c->out.data);
  free(c);
}

/* Sends DATA, keeping what the socket does not take in c->out. -1: the peer is gone. */
static int send_or_keep(struct conn* c, const char* data, size_t len) {
  ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
  size_t sent = n < 0 ? 0 : (size_t)n;
  if (sent < len && append(&c->out, data + sent, len - sent) != 0) return -1;
  return 0;
}

/* Answers every whole request in c->in while nothing is waiting to be sent (a client that does
 * not read its responses gets no more). -1: close the connection now. */
static int serve_requests(struct conn* c) {
  while (c->out.len == 0 && !c->close_after) {
    char* end = c->in.len ? memmem(c->in.data, c->in.len, "\r\n\r\n", 4) : NULL;
    if (end == NULL) return c->in.len > MAX_HEADERS ? -1 : 0;
    size_t used = (size_t)(end + 4 - c->in.data);
    *end = '\0'; /* the request line and headers are now one string, cut into lines below */
    char* line = c->in.data;
    while (line[0] == '\r' && line[1] == '\n') line += 2; /* stray CRLFs before a request */
    char* next = strstr(line, "\r\n");
    if (next != NULL) {
      *next = '\0';
      next += 2;
    }
    size_t request_len = strlen(line);
    int get = strncmp(line, "GET ", 4) == 0, gzip = 0;
    int keep_alive = request_len >= 8 && strcmp(line + request_len - 8, "HTTP/1.1") == 0;
    for (line = next; line != NULL; line = next) {
      next = strstr(line, "\r\n");
      if (next != NULL) {
        *next = '\0';
        next += 2;
      }
      char* value = strchr(line, ':');
      if (value == NULL) continue;
      size_t name_len = (size_t)(value - line);
      if (name_len == 15 && strncasecmp(line, "Accept-Encoding", 15) == 0) {
        gzip = strcasestr(value, "gzip") != NULL;
      } else if (name_len == 10 && strncasecmp(line, "Connection", 10) == 0) {
        keep_alive = strcasestr(value, "close") == NULL &&
                     (keep_alive || strcasestr(value, "keep-alive") != NULL);
      }
    }
    memmove(c->in.data, c->in.data + used, c->in.len - used);
    c->in.len -= used;
    c->close_after = !get || !keep_alive;
    const struct buffer* r = &responses[gzip][!keep_alive];
    if (send_or_keep(c, get ? r->data : not_allowed, get ? r->len : sizeof not_allowed - 1) != 0)
      return -1;
  }
  return 0;
}

/* Reads while no response is pending: a client that pipelines without reading fills its own
 * socket buffers, not our memory. */
static int on_readable(struct conn* c) {
  while (c->out.len == 0 && !c->close_after) {
    char chunk[READ_CHUNK];
    ssize_t n = recv(c->fd, chunk, sizeof chunk, 0);
    if (n == 0) return -1; /* every whole request before the FIN is answered */
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    if (append(&c->in, chunk, (size_t)n) != 0 || serve_requests(c) != 0) return -1;
  }
  return 0;
}

static int on_writable(struct conn* c) {
  while (c->out_sent < c->out.len) {
    ssize_t n = send(c->fd, c->out.data + c->out_sent, c->out.len - c->out_sent, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    c->out_sent += (size_t)n;
  }
  c->out.len = c->out_sent = 0;
  return serve_requests(c); /* requests that waited behind it */
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: serve_static BODY_FILE LISTEN_ADDRESS (e.g. 127.0.0.1:19637)\n");
    return 2;
  }
  struct buffer plain = {0}, gzipped = {0};
  if (read_file(argv[1], &plain) != 0) die(argv[1]);
  if (gzip_body(&plain, &gzipped) != 0) {
    fprintf(stderr, "serve_static: gzip of %s failed\n", argv[1]);
    return 1;
  }
  for (int closing = 0; closing < 2; closing++) {
    build_response(&responses[0][closing], &plain, 0, closing);
    build_response(&responses[1][closing], &gzipped, 1, closing);
  }
  free(plain.data); /* the responses hold their own copies */
  free(gzipped.data);
  int listener = listen_on(argv[2]);
  if (listener < 0) {
    fprintf(stderr, "serve_static: bad listen address '%s' (want HOST:PORT)\n", argv[2]);
    return 2;
  }

  /* Signals through a signalfd: the loop sees them as events, no race with epoll_wait. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, NULL);
  int sfd = signalfd(-1, &stop, SFD_CLOEXEC);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (sfd < 0 || ep < 0) die("signalfd/epoll");
  /* data.ptr NULL: the listener; &sfd: the signal; otherwise a struct conn. */
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) != 0) die("epoll_ctl");
  ev.data.ptr = &sfd;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) != 0) die("epoll_ctl");

  for (;;) {
    struct epoll_event events[64];
    int n = epoll_wait(ep, events, 64, -1);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    for (int i = 0; i < n; i++) {
      if (events[i].data.ptr == &sfd) return 0;
      if (events[i].data.ptr == NULL) {
        int fd;
        while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          int one = 1; /* a response is one send; do not let Nagle hold its tail */
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct conn* c = calloc(1, sizeof *c);
          if (c == NULL) {
            close(fd);
            continue;
          }
          c->fd = fd;
          c->events = EPOLLIN | EPOLLRDHUP;
          ev = (struct epoll_event){.events = c->events, .data.ptr = c};
          if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) close_conn(c);
        }
        continue;
      }
      struct conn* c = events[i].data.ptr;
      int rc = 0;
      if (events[i].events & (EPOLLERR | EPOLLHUP)) rc = -1;
      if (rc == 0 && (events[i].events & EPOLLOUT)) rc = on_writable(c);
      if (rc == 0 && (events[i].events & (EPOLLIN | EPOLLRDHUP))) rc = on_readable(c);
      if (rc == 0 && c->close_after && c->out.len == 0) rc = -1; /* answered, closing */
      if (rc != 0) {
        close_conn(c);
        continue;
      }
      /* Either reading or, while a response is pending, waiting to write: never both. */
      uint32_t want = c->out.len ? EPOLLOUT : EPOLLIN | EPOLLRDHUP;
      if (want != c->events) {
        c->events = want;
        ev = (struct epoll_event){.events = want, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) close_conn(c);
      }
    }
  }
}
