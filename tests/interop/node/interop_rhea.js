#!/usr/bin/env node
// rhea (an AMQP 1.0 client we did not write) against filtex-broker.
//   node interop_rhea.js HOST PORT ADDRESS
// Sends shapes to ADDRESS, then
//   1. attaches a receiver whose filter set is built with rhea's own helpers
//      (rhea.filter.selector, rhea.types.wrap_described, rhea.types.described)
//      and collects what it is given up to a matching sentinel;
//   2. attaches a receiver with a malformed SQL filter and records how rhea
//      reports the refusal (the reply attach's source, the detach error);
//   3. drains the rest of the queue with an unfiltered receiver.
// Prints one JSON object on stdout; exits non-zero on a timeout.
'use strict';

const rhea = require('rhea');

const [host, port, address] = process.argv.slice(2);
const SHAPES = [
  {n: 0, colour: 'red', shape: 'circle', size: 1, subject: 'order.new'},
  {n: 1, colour: 'red', shape: 'circle', size: 5, subject: 'order.new'},
  {n: 2, colour: 'blue', shape: 'circle', size: 5, subject: 'order.new'},
  {n: 3, colour: 'red', shape: 'square', size: 5, subject: 'order.new'},
  {n: 4, colour: 'red', shape: 'circle', size: 7, subject: 'invoice'},
  {n: 5, colour: 'red', shape: 'circle', size: 9, subject: 'order.paid'},
];
const SENTINEL = {n: 99, colour: 'red', shape: 'circle', size: 100, subject: 'order.end'};

// One filter set, four types, all from rhea's helpers:
const filterSet = Object.assign(
  {},
  rhea.filter.selector("colour = 'red'"),  // jms-selector, numeric descriptor 0x468C00000004
  {
    'big': rhea.types.wrap_described('size > 2', 'amqp:sql-filter'),
    'circles': rhea.types.wrap_described({shape: 'circle'}, 'amqp:application-properties-filter'),
    'orders': rhea.types.described(
      rhea.types.wrap_symbol('amqp:properties-filter'),
      rhea.types.wrap_symbolic_map({subject: '&p:order.'})),
  });

const result = {filtered: [], refusal: null, rest: []};
const timer = setTimeout(() => {
  process.stderr.write('timed out: ' + JSON.stringify(result) + '\n');
  process.exit(3);
}, 20000);

const container = rhea.create_container({id: 'rhea-interop'});
const connection = container.connect({host: host, port: Number(port), reconnect: false});

function step2Refusal() {
  const bad = connection.open_receiver({
    name: 'rhea-refused',
    source: {address: address, filter: {
      'broken': rhea.types.wrap_described("colour = = 'red'", 'amqp:sql-filter')}},
  });
  const seen = {source_on_attach: 'not-seen', error: null};
  bad.on('receiver_open', (context) => {
    seen.source_on_attach = context.receiver.source === undefined ? null : context.receiver.source;
  });
  bad.on('receiver_error', (context) => {
    const error = context.receiver.error;
    seen.error = {condition: error.condition, description: error.description,
      info: error.info === undefined ? null : error.info};
  });
  bad.on('receiver_close', () => {
    result.refusal = seen;
    step3Rest();
  });
}

function step3Rest() {
  const rest = connection.open_receiver({name: 'rhea-rest', source: {address: address}});
  const expected = SHAPES.length - result.filtered.length;
  if (expected === 0) return finish();
  rest.on('message', (context) => {
    result.rest.push(context.message.body);
    if (result.rest.length === expected) finish();
  });
}

function finish() {
  clearTimeout(timer);
  connection.close();
  connection.on('connection_close', () => {
    process.stdout.write(JSON.stringify(result) + '\n');
  });
}

function step1Filtered() {
  const receiver = connection.open_receiver({
    name: 'rhea-filtered', source: {address: address, filter: filterSet}});
  receiver.on('receiver_open', (context) => {
    result.filter_echoed = Object.keys(context.receiver.source.filter || {}).sort();
  });
  receiver.on('message', (context) => {
    const body = context.message.body;
    if (body === SENTINEL.n) {
      receiver.close();
      receiver.on('receiver_close', step2Refusal);
    } else {
      result.filtered.push(body);
    }
  });
}

connection.on('connection_open', (context) => {
  result.offered_capabilities = [].concat(context.connection.remote.open.offered_capabilities || []).map(String);
  const sender = connection.open_sender({target: {address: address}});
  let accepted = 0;
  const all = SHAPES.concat([SENTINEL]);
  sender.once('sendable', () => {
    for (const shape of all) {
      sender.send({
        subject: shape.subject,
        application_properties: {colour: shape.colour, shape: shape.shape, size: shape.size},
        body: shape.n,
      });
    }
  });
  sender.on('accepted', () => {
    if (++accepted === all.length) {
      sender.close();
      step1Filtered();
    }
  });
  sender.on('rejected', (context) => {
    process.stderr.write('rejected: ' + JSON.stringify(context.delivery.remote_state) + '\n');
    process.exit(4);
  });
});
connection.on('disconnected', (context) => {
  if (context.error) {
    process.stderr.write('disconnected: ' + context.error + '\n');
    process.exit(5);
  }
});
