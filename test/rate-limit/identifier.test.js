'use strict';
const {
  resolveIdentifier,
  templateUsesAttributes,
  parseTemplate,
} = require('../../dist/cjs/rate-limit/identifier');

function fakeReq({ ip = '203.0.113.7', headers = {}, query, url = '/' } = {}) {
  const req = { ip, headers, url, socket: { remoteAddress: ip } };
  if (query !== undefined) req.query = query;
  return req;
}

describe('identifier templates', () => {
  test('default is {ip} (undefined or empty template)', () => {
    expect(resolveIdentifier(undefined, fakeReq())).toBe('203.0.113.7');
    expect(resolveIdentifier('', fakeReq())).toBe('203.0.113.7');
    expect(resolveIdentifier('{ip}', fakeReq())).toBe('203.0.113.7');
  });

  test('a query parameter or attribute named like an Object.prototype member falls back to the IP when absent', () => {
    const req = fakeReq({ query: {} });
    expect(resolveIdentifier('{query.constructor}', req)).toBe('\u0000203.0.113.7');
    expect(resolveIdentifier('{attr.toString}', req, {})).toBe('\u0000203.0.113.7');
    expect(resolveIdentifier('{query.constructor}', fakeReq({ url: '/?constructor=k' }))).toBe('k');
  });

  test('{ip} uses req.ip, never a raw X-Forwarded-For', () => {
    const req = fakeReq({ ip: '198.51.100.1', headers: { 'x-forwarded-for': '1.2.3.4' } });
    expect(resolveIdentifier('{ip}', req)).toBe('198.51.100.1');
  });

  test('{ip} falls back to the socket address when req.ip is unset', () => {
    const req = { headers: {}, socket: { remoteAddress: '192.0.2.9' } };
    expect(resolveIdentifier('{ip}', req)).toBe('192.0.2.9');
  });

  test('IPv6 addresses are grouped by /56 by default', () => {
    const a = resolveIdentifier('{ip}', fakeReq({ ip: '2001:db8:abcd:1234:1:2:3:4' }));
    const b = resolveIdentifier('{ip}', fakeReq({ ip: '2001:db8:abcd:12ff:ffff::1' }));
    const c = resolveIdentifier('{ip}', fakeReq({ ip: '2001:db8:abcd:1300::1' }));
    expect(a).toBe(b);
    expect(a).not.toBe(c);
    expect(a).toBe('2001:db8:abcd:1200::/56');
  });

  test('the IPv6 subnet is configurable', () => {
    const ip = '2001:db8:abcd:1234:1:2:3:4';
    expect(resolveIdentifier('{ip}', fakeReq({ ip }), undefined, 64)).toBe('2001:db8:abcd:1234::/64');
    expect(resolveIdentifier('{ip}', fakeReq({ ip }), undefined, 128)).not.toBe(
      resolveIdentifier('{ip}', fakeReq({ ip: '2001:db8:abcd:1234:1:2:3:5' }), undefined, 128),
    );
  });

  test('IPv4-mapped IPv6 becomes the IPv4 address', () => {
    expect(resolveIdentifier('{ip}', fakeReq({ ip: '::ffff:10.1.2.3' }))).toBe('10.1.2.3');
  });

  test('{header.NAME} is case-insensitive', () => {
    const req = fakeReq({ headers: { 'x-user': 'alice' } });
    expect(resolveIdentifier('{header.X-User}', req)).toBe('alice');
    expect(resolveIdentifier('{header.x-user}', req)).toBe('alice');
  });

  test('{query.NAME} reads the URL\'s query, as scripts see it (first value of a repeated parameter)', () => {
    expect(resolveIdentifier('{query.key}', fakeReq({ url: '/x?a=1&key=zz' }))).toBe('zz');
    expect(resolveIdentifier('{query.key}', fakeReq({ url: '/x?key=k1&key=k2' }))).toBe('k1');
    expect(resolveIdentifier('{query.a}/{query.key}', fakeReq({ url: '/x?a=1&key=a%20b+c' }))).toBe('1/a b c');
    // not Express's parsed req.query (an extended parser nests, a disabled one gives {})
    expect(resolveIdentifier('{query.key}', fakeReq({ url: '/x', query: { key: 'k1' } }))).toBe('\u0000203.0.113.7');
    expect(resolveIdentifier('{query.key[x]}', fakeReq({ url: '/x?key[x]=1', query: { key: { x: '1' } } }))).toBe('1');
    // originalUrl when mounted (req.url is then relative to the mount point; the query is the same)
    expect(resolveIdentifier('{query.key}', { ...fakeReq({ url: '/p' }), originalUrl: '/web0/api/app1/p?key=m' })).toBe('m');
  });

  test('{cookie.NAME} parses the Cookie header', () => {
    const req = fakeReq({ headers: { cookie: 'a=1; session=s%20id; b=2' } });
    expect(resolveIdentifier('{cookie.session}', req)).toBe('s id');
    expect(resolveIdentifier('{cookie.a}-{cookie.b}', req)).toBe('1-2');
  });

  test('{attr.NAME} reads the attributes object', () => {
    const req = fakeReq();
    expect(resolveIdentifier('{attr.user}', req, { user: 'u42' })).toBe('u42');
    expect(resolveIdentifier('{attr.n}', req, { n: 7 })).toBe('7');
    expect(resolveIdentifier('{attr.o}', req, { o: { id: 1 } })).toBe('{"id":1}');
    expect(resolveIdentifier('{attr.a}', req, { a: ['acme', 'alice'] })).toBe('["acme","alice"]');
  });

  test('an empty placeholder value falls back to the IP, marked (\\0) so that no value names the same bucket', () => {
    const req = fakeReq({ headers: { 'x-empty': '' }, query: {} });
    const ip = '\u0000203.0.113.7';
    expect(resolveIdentifier('{header.x-user}', req)).toBe(ip);
    expect(resolveIdentifier('{header.x-empty}', req)).toBe(ip);
    expect(resolveIdentifier('{query.key}', req)).toBe(ip);
    expect(resolveIdentifier('{cookie.sid}', req)).toBe(ip);
    expect(resolveIdentifier('{attr.user}', req)).toBe(ip);
    expect(resolveIdentifier('{attr.user}', req, { user: null })).toBe(ip);
    expect(resolveIdentifier('user:{header.x-user}', req)).toBe(`user:${ip}`);
    // values carry no \0: it becomes U+FFFD
    expect(resolveIdentifier('{query.key}', fakeReq({ url: '/?key=%00203.0.113.7' }))).toBe('\uFFFD203.0.113.7');
    expect(resolveIdentifier('{attr.user}', req, { user: 'a\u0000b' })).toBe('a\uFFFDb');
    expect(resolveIdentifier('{header.x-user}', fakeReq({ headers: { 'x-user': '203.0.113.7' } }))).toBe('203.0.113.7');
  });

  test('other text is literal', () => {
    const req = fakeReq({ headers: { 'x-tenant': 't1' } });
    expect(resolveIdentifier('global', req)).toBe('global');
    expect(resolveIdentifier('tenant={header.x-tenant}|{ip}', req)).toBe('tenant=t1|203.0.113.7');
    expect(resolveIdentifier('{unknown} {header.} {ip', req)).toBe('{unknown} {header.} {ip');
  });

  test('templates are parsed once and cached', () => {
    expect(parseTemplate('a{ip}b')).toBe(parseTemplate('a{ip}b'));
    expect(parseTemplate('a{ip}b').parts).toEqual([
      { kind: 'literal', text: 'a' },
      { kind: 'ip' },
      { kind: 'literal', text: 'b' },
    ]);
  });

  test('templateUsesAttributes', () => {
    expect(templateUsesAttributes('{attr.user}')).toBe(true);
    expect(templateUsesAttributes('x-{header.a}-{attr.b}')).toBe(true);
    expect(templateUsesAttributes('{ip}')).toBe(false);
    expect(templateUsesAttributes(undefined)).toBe(false);
    expect(templateUsesAttributes('attr.user')).toBe(false);
  });
});
