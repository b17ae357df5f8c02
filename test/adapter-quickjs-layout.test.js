'use strict';
/**
 * The adapter suite again, with the per-stage records laid out as under QuickJS (fields read from
 * prototypes of defaults until written: lib/runtime/sandbox/prelude.js, IS_QUICKJS). The layout
 * changes only what each engine pays; every answer must stay the same.
 */
process.env.ADAPTER_LAYOUT = 'quickjs';
require('./adapter.test.js');
