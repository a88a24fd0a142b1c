/*
 * A Qpid Proton C (proactor API) receiver that attaches with a filter, used by
 * tests/interop/test_interop_proton_c.py against filtex-broker.
 *
 *   filtered_receive HOST PORT ADDRESS SQL LAST_ID BAD_SQL
 *
 * 1. Attaches to ADDRESS with the filter set {"c-sql": amqp:sql-filter SQL}
 *    (a described string, descriptor symbol) and accepts what it is given
 *    until a message whose (ulong) message-id is LAST_ID arrives.
 * 2. Attaches again with {"c-bad": amqp:sql-filter BAD_SQL} and records how
 *    the reply looks to Proton C: the remote source of the reply attach and
 *    the condition carried by the detach.
 * Prints one JSON object on stdout.
 */
#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct app_t {
  const char *host, *port, *address, *sql, *bad_sql;
  unsigned long long last_id;
  pn_proactor_t *proactor;
  pn_session_t *session;
  pn_link_t *filtered, *refused;
  pn_message_t *message;
  unsigned long long received[256];
  size_t received_count;
  int refused_attach_seen;
  int refused_source_null;
  char cond_name[256], cond_description[4096], cond_info[1024];
  int done;
  int failed;
} app_t;

static void json_string(const char *s) {
  putchar('"');
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c == '\n') fputs("\\n", stdout);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

static pn_link_t *open_filtered_receiver(pn_session_t *s, const char *name, const char *address,
                                         const char *key, const char *sql) {
  pn_link_t *l = pn_receiver(s, name);
  pn_terminus_t *source = pn_link_source(l);
  pn_terminus_set_address(source, address);
  pn_data_t *filter = pn_terminus_filter(source);
  pn_data_put_map(filter);
  pn_data_enter(filter);
  pn_data_put_symbol(filter, pn_bytes(strlen(key), key));
  pn_data_put_described(filter);
  pn_data_enter(filter);
  pn_data_put_symbol(filter, pn_bytes(strlen("amqp:sql-filter"), "amqp:sql-filter"));
  pn_data_put_string(filter, pn_bytes(strlen(sql), sql));
  pn_data_exit(filter);
  pn_data_exit(filter);
  pn_link_open(l);
  pn_link_flow(l, 100);
  return l;
}

static void print_result(app_t *app) {
  printf("{\"received_ids\": [");
  for (size_t i = 0; i < app->received_count; ++i)
    printf("%s%llu", i ? ", " : "", app->received[i]);
  printf("], \"refusal\": {\"attach_seen\": %s, \"source_null\": %s, \"condition\": ",
         app->refused_attach_seen ? "true" : "false", app->refused_source_null ? "true" : "false");
  json_string(app->cond_name);
  printf(", \"description\": ");
  json_string(app->cond_description);
  printf(", \"info\": ");
  json_string(app->cond_info);
  printf("}}\n");
}

static void on_delivery(app_t *app, pn_delivery_t *d) {
  pn_link_t *l = pn_delivery_link(d);
  if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return;
  size_t size = pn_delivery_pending(d);
  char *buffer = malloc(size);
  ssize_t got = pn_link_recv(l, buffer, size);
  pn_link_advance(l);
  pn_message_clear(app->message);
  if (got < 0 || pn_message_decode(app->message, buffer, (size_t)got) != 0) {
    fprintf(stderr, "cannot decode a message\n");
    app->failed = 1;
  }
  free(buffer);
  pn_atom_t id = pn_message_get_id(app->message);
  unsigned long long value = id.type == PN_ULONG ? (unsigned long long)id.u.as_ulong : 0;
  pn_delivery_update(d, PN_ACCEPTED);
  pn_delivery_settle(d);
  if (app->received_count < sizeof(app->received) / sizeof(app->received[0]))
    app->received[app->received_count++] = value;
  if (value == app->last_id && l == app->filtered) {
    pn_link_close(l);
    app->refused = open_filtered_receiver(app->session, "c-refused", app->address, "c-bad",
                                          app->bad_sql);
  }
}

static int handle(app_t *app, pn_event_t *e) {
  switch (pn_event_type(e)) {
  case PN_CONNECTION_INIT: {
    pn_connection_t *c = pn_event_connection(e);
    pn_connection_set_container(c, "proton-c-interop");
    pn_connection_open(c);
    app->session = pn_session(c);
    pn_session_open(app->session);
    app->filtered = open_filtered_receiver(app->session, "c-filtered", app->address, "c-sql",
                                           app->sql);
    break;
  }
  case PN_DELIVERY:
    on_delivery(app, pn_event_delivery(e));
    break;
  case PN_LINK_REMOTE_OPEN: {
    pn_link_t *l = pn_event_link(e);
    if (l == app->refused) {
      app->refused_attach_seen = 1;
      app->refused_source_null = pn_terminus_get_type(pn_link_remote_source(l)) == PN_UNSPECIFIED;
    }
    break;
  }
  case PN_LINK_REMOTE_CLOSE:
  case PN_LINK_REMOTE_DETACH: {
    pn_link_t *l = pn_event_link(e);
    if (l == app->refused) {
      pn_condition_t *cond = pn_link_remote_condition(l);
      if (pn_condition_is_set(cond)) {
        snprintf(app->cond_name, sizeof app->cond_name, "%s", pn_condition_get_name(cond));
        const char *text = pn_condition_get_description(cond);
        snprintf(app->cond_description, sizeof app->cond_description, "%s", text ? text : "");
        size_t n = sizeof app->cond_info;
        pn_data_t *info = pn_condition_info(cond);
        pn_data_rewind(info);
        if (pn_data_format(info, app->cond_info, &n) != 0) app->cond_info[0] = 0;
      }
      pn_link_close(l);
      pn_connection_close(pn_event_connection(e));
      app->done = 1;
    } else if (l == app->filtered && pn_condition_is_set(pn_link_remote_condition(l))) {
      pn_condition_t *cond = pn_link_remote_condition(l);
      fprintf(stderr, "filtered link detached: %s: %s\n", pn_condition_get_name(cond),
              pn_condition_get_description(cond));
      app->failed = 1;
      pn_connection_close(pn_event_connection(e));
    }
    break;
  }
  case PN_CONNECTION_REMOTE_CLOSE:
    pn_connection_close(pn_event_connection(e));
    break;
  case PN_TRANSPORT_CLOSED: {
    pn_condition_t *cond = pn_transport_condition(pn_event_transport(e));
    if (pn_condition_is_set(cond) && !app->done) {
      fprintf(stderr, "transport: %s: %s\n", pn_condition_get_name(cond),
              pn_condition_get_description(cond));
      app->failed = 1;
    }
    break;
  }
  case PN_PROACTOR_INACTIVE:
    return 0;
  default:
    break;
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s HOST PORT ADDRESS SQL LAST_ID BAD_SQL\n", argv[0]);
    return 2;
  }
  app_t app;
  memset(&app, 0, sizeof app);
  app.host = argv[1];
  app.port = argv[2];
  app.address = argv[3];
  app.sql = argv[4];
  app.last_id = strtoull(argv[5], NULL, 10);
  app.bad_sql = argv[6];
  app.message = pn_message();
  app.proactor = pn_proactor();
  char addr[PN_MAX_ADDR];
  pn_proactor_addr(addr, sizeof addr, app.host, app.port);
  pn_proactor_connect2(app.proactor, NULL, NULL, addr);
  int running = 1;
  while (running) {
    pn_event_batch_t *events = pn_proactor_wait(app.proactor);
    pn_event_t *e;
    while (running && (e = pn_event_batch_next(events))) running = handle(&app, e);
    pn_proactor_done(app.proactor, events);
  }
  pn_proactor_free(app.proactor);
  pn_message_free(app.message);
  if (!app.done) {
    fprintf(stderr, "the refusal was never seen\n");
    return 1;
  }
  print_result(&app);
  return app.failed;
}
