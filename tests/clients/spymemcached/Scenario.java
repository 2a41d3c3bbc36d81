import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import net.spy.memcached.CASResponse;
import net.spy.memcached.CASValue;
import net.spy.memcached.ConnectionFactoryBuilder;
import net.spy.memcached.MemcachedClient;
import net.spy.memcached.internal.OperationFuture;

/**
 * One scenario of spymemcached (the Java memcached client) against a memcached server, over the
 * text or the binary protocol: test_mc_clients_more.py runs it against tablesocket and against
 * memcached 1.6.18 and compares the outputs line by line. Prints a line per step (Steps.java).
 *
 * Usage: java -cp spymemcached.jar:. Scenario host:port keyprefix text|binary
 */
public class Scenario {
  static MemcachedClient c;
  static String p;

  static String k(String s) { return p + s; }

  /** A store's outcome, as the future gives it. */
  static Object done(OperationFuture<Boolean> f) throws Exception {
    return f.get(10, TimeUnit.SECONDS);
  }

  public static void main(String[] args) throws Exception {
    String[] hp = args[0].split(":");
    p = args[1];
    boolean binary = args[2].equals("binary");
    c = new MemcachedClient(new ConnectionFactoryBuilder()
        .setProtocol(binary ? ConnectionFactoryBuilder.Protocol.BINARY : ConnectionFactoryBuilder.Protocol.TEXT)
        .setOpTimeout(10000).build(),
        Collections.singletonList(new InetSocketAddress(hp[0], Integer.parseInt(hp[1]))));
    try {
      run(binary);
    } finally {
      c.shutdown(10, TimeUnit.SECONDS);
    }
  }

  static void run(boolean binary) throws Exception {
    // values of every transcoder type
    Steps.step("set string", () -> done(c.set(k("s"), 0, "hello")));
    Steps.step("get string", () -> c.get(k("s")));
    Steps.step("get miss", () -> c.get(k("missing")));
    Steps.step("set int", () -> done(c.set(k("i"), 0, 123456)));
    Steps.step("get int", () -> c.get(k("i")));
    Steps.step("set long", () -> done(c.set(k("l"), 0, 9876543210L)));
    Steps.step("get long", () -> c.get(k("l")));
    Steps.step("set bool", () -> done(c.set(k("b"), 0, true)));
    Steps.step("get bool", () -> c.get(k("b")));
    byte[] all = new byte[256];
    for (int i = 0; i < 256; i++) all[i] = (byte) i;
    Steps.step("set bytes", () -> done(c.set(k("bytes"), 0, all)));
    Steps.step("get bytes", () -> Arrays.equals((byte[]) c.get(k("bytes")), all));
    Steps.step("set object", () -> done(c.set(k("o"), 0, new Steps.Point(3, 4))));
    Steps.step("get object", () -> c.get(k("o")));
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < 3000; i++) sb.append("compressible text ").append(i % 10).append(' ');
    String big = sb.toString();  // over 16 KB: the transcoder compresses it
    Steps.step("set compressed", () -> done(c.set(k("z"), 0, big)));
    Steps.step("get compressed", () -> big.equals(c.get(k("z"))));
    Steps.step("set empty", () -> done(c.set(k("e"), 0, "")));
    Steps.step("get empty", () -> c.get(k("e")));

    // storage commands
    Steps.step("add existing", () -> done(c.add(k("s"), 0, "x")));
    Steps.step("add new", () -> done(c.add(k("n"), 0, "new")));
    Steps.step("replace missing", () -> done(c.replace(k("nope"), 0, "x")));
    Steps.step("replace existing", () -> done(c.replace(k("n"), 0, "replaced")));
    Steps.step("get replaced", () -> c.get(k("n")));
    Steps.step("append", () -> done(c.append(k("s"), " world")));
    Steps.step("prepend", () -> done(c.prepend(k("s"), "> ")));
    Steps.step("get appended", () -> c.get(k("s")));
    Steps.step("append missing", () -> done(c.append(k("nope"), "x")));

    // bulk get: 50 stored, 50 missing
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < 100; i++) {
      keys.add(k("m" + i));
      if (i % 2 == 0) c.set(k("m" + i), 0, "v" + i).get();
    }
    Steps.step("get bulk", () -> {
      Map<String, Object> m = c.getBulk(keys);
      int right = 0;
      for (int i = 0; i < 100; i += 2) if (("v" + i).equals(m.get(k("m" + i)))) right++;
      return "found=" + m.size() + " right=" + right;
    });

    // compare and swap
    CASValue<Object> v = c.gets(k("s"));
    Steps.step("gets", () -> v == null ? null : v.getValue() + " cas>0=" + (v.getCas() > 0));
    Steps.step("cas", () -> c.cas(k("s"), v.getCas(), "swapped"));
    Steps.step("cas stale", () -> c.cas(k("s"), v.getCas(), "stale"));
    Steps.step("get swapped", () -> c.get(k("s")));
    Steps.step("cas missing", () -> c.cas(k("nope"), 1, "x"));
    Steps.step("gets miss", () -> c.gets(k("nope")));

    // delete
    Steps.step("delete", () -> c.delete(k("n")).get(10, TimeUnit.SECONDS));
    Steps.step("delete miss", () -> c.delete(k("n")).get(10, TimeUnit.SECONDS));

    // counters (spymemcached stores them as text)
    c.set(k("ctr"), 0, "41").get();
    Steps.step("incr", () -> c.incr(k("ctr"), 1));
    Steps.step("decr", () -> c.decr(k("ctr"), 2));
    Steps.step("decr below zero", () -> c.decr(k("ctr"), 1000));
    Steps.step("incr miss", () -> c.incr(k("nope"), 1));
    Steps.step("incr with default", () -> c.incr(k("d"), 5, 100));
    Steps.step("incr existing with default", () -> c.incr(k("d"), 5, 100));
    c.set(k("w"), 0, "18446744073709551615").get();
    Steps.step("incr wraps", () -> c.incr(k("w"), 2));
    Steps.step("incr non-numeric", () -> c.incr(k("s"), 1));

    // touch and expiry
    c.set(k("t"), 0, "v").get();
    Steps.step("touch", () -> c.touch(k("t"), 2).get(10, TimeUnit.SECONDS));
    Steps.step("touch miss", () -> c.touch(k("nope"), 1).get(10, TimeUnit.SECONDS));
    Steps.step("set expiring", () -> done(c.set(k("x"), 2, "v")));
    Steps.step("get before expiry", () -> c.get(k("x")));
    Thread.sleep(3500);  // memcached's clock ticks once a second: a 2 s item lives 1 to 2 s
    Steps.step("get after expiry", () -> c.get(k("x")));
    Steps.step("get touched after expiry", () -> c.get(k("t")));
    if (binary) {
      c.set(k("gat"), 0, "gv").get();
      Steps.step("get and touch", () -> { CASValue<Object> g = c.getAndTouch(k("gat"), 100); return g == null ? null : g.getValue(); });
      Steps.step("get and touch miss", () -> c.getAndTouch(k("nope"), 100));
    }

    // sizes and keys
    byte[] mb = new byte[1000000];
    Arrays.fill(mb, (byte) 'y');
    Steps.step("set 1 MB", () -> done(c.set(k("big"), 0, mb)));
    Steps.step("get 1 MB", () -> Arrays.equals((byte[]) c.get(k("big")), mb));
    byte[] over = new byte[1024 * 1024 + 1];
    new java.util.Random(7).nextBytes(over);  // incompressible: the transcoder sends it as it is
    Steps.step("set over the limit", () -> done(c.set(k("big"), 0, over)));
    Steps.step("old value removed", () -> c.get(k("big")));
    char[] kk = new char[250 - p.length()];
    Arrays.fill(kk, 'k');
    String longKey = k(new String(kk));
    Steps.step("250-byte key", () -> done(c.set(longKey, 0, "v")));
    Steps.step("get 250-byte key", () -> c.get(longKey));
    Steps.step("251-byte key", () -> done(c.set(longKey + "k", 0, "v")));

    // 50 threads: their own keys, verified, and one shared counter
    c.set(k("shared"), 0, "0").get();
    int bad = Steps.concurrently(50, 20, (id, r) -> {
      String mine = k("t" + id), want = id + "-" + r;
      int failed = 0;
      if (!c.set(mine, 0, want).get(10, TimeUnit.SECONDS)) failed++;
      if (!want.equals(c.get(mine))) failed++;
      if (c.incr(k("shared"), 1) < 1) failed++;
      return failed;
    });
    Steps.step("concurrent", () -> "bad=" + bad + " counter=" + c.get(k("shared")));
  }
}
