import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import net.rubyeye.xmemcached.GetsResponse;
import net.rubyeye.xmemcached.MemcachedClient;
import net.rubyeye.xmemcached.XMemcachedClientBuilder;
import net.rubyeye.xmemcached.command.BinaryCommandFactory;
import net.rubyeye.xmemcached.transcoders.SerializingTranscoder;
import net.rubyeye.xmemcached.utils.AddrUtil;

/**
 * One scenario of xmemcached (a Java memcached client) against a memcached server, over the text
 * or the binary protocol: test_mc_clients_more.py runs it against tablesocket and against
 * memcached 1.6.18 and compares the outputs line by line. Prints a line per step (Steps.java).
 *
 * Usage: java -cp xmemcached.jar:slf4j-api.jar:. Scenario host:port keyprefix text|binary
 */
public class Scenario {
  static MemcachedClient c;
  static String p;

  static String k(String s) { return p + s; }

  public static void main(String[] args) throws Exception {
    p = args[1];
    boolean binary = args[2].equals("binary");
    XMemcachedClientBuilder b = new XMemcachedClientBuilder(AddrUtil.getAddresses(args[0]));
    if (binary) b.setCommandFactory(new BinaryCommandFactory());
    b.setOpTimeout(10000);
    c = b.build();
    c.setTranscoder(new SerializingTranscoder(2 * 1024 * 1024));  // lets the client send a too-large value
    try {
      run(binary);
    } finally {
      c.shutdown();
    }
  }

  static void run(boolean binary) throws Exception {
    // values of every transcoder type
    Steps.step("set string", () -> c.set(k("s"), 0, "hello"));
    Steps.step("get string", () -> c.get(k("s")));
    Steps.step("get miss", () -> c.get(k("missing")));
    Steps.step("set int", () -> c.set(k("i"), 0, 123456));
    Steps.step("get int", () -> c.get(k("i")));
    Steps.step("set long", () -> c.set(k("l"), 0, 9876543210L));
    Steps.step("get long", () -> c.get(k("l")));
    byte[] all = new byte[256];
    for (int i = 0; i < 256; i++) all[i] = (byte) i;
    Steps.step("set bytes", () -> c.set(k("bytes"), 0, all));
    Steps.step("get bytes", () -> Arrays.equals((byte[]) c.get(k("bytes")), all));
    Steps.step("set object", () -> c.set(k("o"), 0, new Steps.Point(3, 4)));
    Steps.step("get object", () -> c.get(k("o")));
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < 3000; i++) sb.append("compressible text ").append(i % 10).append(' ');
    String big = sb.toString();  // over 16 KB: the transcoder compresses it
    Steps.step("set compressed", () -> c.set(k("z"), 0, big));
    Steps.step("get compressed", () -> big.equals(c.get(k("z"))));
    Steps.step("set empty", () -> c.set(k("e"), 0, ""));
    Steps.step("get empty", () -> c.get(k("e")));
    // (one connection: the get follows the noreply set on it)
    Steps.step("set noreply", () -> { c.setWithNoReply(k("nr"), 0, "quiet"); return c.get(k("nr")); });

    // storage commands
    Steps.step("add existing", () -> c.add(k("s"), 0, "x"));
    Steps.step("add new", () -> c.add(k("n"), 0, "new"));
    Steps.step("replace missing", () -> c.replace(k("nope"), 0, "x"));
    Steps.step("replace existing", () -> c.replace(k("n"), 0, "replaced"));
    Steps.step("get replaced", () -> c.get(k("n")));
    Steps.step("append", () -> c.append(k("s"), " world"));
    Steps.step("prepend", () -> c.prepend(k("s"), "> "));
    Steps.step("get appended", () -> c.get(k("s")));
    Steps.step("append missing", () -> c.append(k("nope"), "x"));

    // multi-get: 50 stored, 50 missing
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < 100; i++) {
      keys.add(k("m" + i));
      if (i % 2 == 0) c.set(k("m" + i), 0, "v" + i);
    }
    Steps.step("get multi", () -> {
      Map<String, Object> m = c.get(keys);
      int right = 0;
      for (int i = 0; i < 100; i += 2) if (("v" + i).equals(m.get(k("m" + i)))) right++;
      return "found=" + m.size() + " right=" + right;
    });
    Steps.step("gets multi", () -> {
      Map<String, GetsResponse<Object>> m = c.gets(keys);
      int withCas = 0;
      for (GetsResponse<Object> g : m.values()) if (g.getCas() != 0) withCas++;
      return "found=" + m.size() + " withCas=" + withCas;
    });

    // compare and swap
    GetsResponse<Object> v = c.gets(k("s"));
    Steps.step("gets", () -> v == null ? null : v.getValue() + " cas>0=" + (v.getCas() > 0));
    Steps.step("cas", () -> c.cas(k("s"), 0, "swapped", v.getCas()));
    Steps.step("cas stale", () -> c.cas(k("s"), 0, "stale", v.getCas()));
    Steps.step("get swapped", () -> c.get(k("s")));
    Steps.step("cas missing", () -> c.cas(k("nope"), 0, "x", 1));
    Steps.step("gets miss", () -> c.gets(k("nope")));

    // delete
    Steps.step("delete", () -> c.delete(k("n")));
    Steps.step("delete miss", () -> c.delete(k("n")));

    // counters
    c.set(k("ctr"), 0, "41");
    Steps.step("incr", () -> c.incr(k("ctr"), 1));
    Steps.step("decr", () -> c.decr(k("ctr"), 2));
    Steps.step("decr below zero", () -> c.decr(k("ctr"), 1000));
    Steps.step("incr with initial", () -> c.incr(k("d"), 5, 100));
    Steps.step("incr existing with initial", () -> c.incr(k("d"), 5, 100));
    c.set(k("w"), 0, "18446744073709551615");
    Steps.step("incr wraps", () -> c.incr(k("w"), 2));

    // touch and expiry
    c.set(k("t"), 0, "v");
    Steps.step("touch", () -> c.touch(k("t"), 2));
    Steps.step("touch miss", () -> c.touch(k("nope"), 1));
    Steps.step("set expiring", () -> c.set(k("x"), 2, "v"));
    Steps.step("get before expiry", () -> c.get(k("x")));
    Thread.sleep(3500);  // memcached's clock ticks once a second: a 2 s item lives 1 to 2 s
    Steps.step("get after expiry", () -> c.get(k("x")));
    Steps.step("get touched after expiry", () -> c.get(k("t")));
    if (binary) {
      c.set(k("gat"), 0, "gv");
      Steps.step("get and touch", () -> c.getAndTouch(k("gat"), 100));
      Steps.step("get and touch miss", () -> c.getAndTouch(k("nope"), 100));
    }

    // sizes and keys
    byte[] mb = new byte[1000000];
    new java.util.Random(3).nextBytes(mb);
    Steps.step("set 1 MB", () -> c.set(k("big"), 0, mb));
    Steps.step("get 1 MB", () -> Arrays.equals((byte[]) c.get(k("big")), mb));
    char[] kk = new char[250 - p.length()];
    Arrays.fill(kk, 'k');
    String longKey = k(new String(kk));
    Steps.step("250-byte key", () -> c.set(longKey, 0, "v"));
    Steps.step("get 250-byte key", () -> c.get(longKey));
    Steps.step("251-byte key", () -> c.set(longKey + "k", 0, "v"));

    // 50 threads: their own keys, verified, and one shared counter
    c.set(k("shared"), 0, "0");
    int bad = Steps.concurrently(50, 20, (id, r) -> {
      String mine = k("t" + id), want = id + "-" + r;
      int failed = 0;
      if (!c.set(mine, 0, want)) failed++;
      if (!want.equals(c.get(mine))) failed++;
      if (c.incr(k("shared"), 1) < 1) failed++;
      return failed;
    });
    Steps.step("concurrent", () -> "bad=" + bad + " counter=" + c.get(k("shared")));

    // last: xmemcached closes and reopens its connection after a server error
    byte[] over = new byte[1024 * 1024 + 1];
    new java.util.Random(7).nextBytes(over);  // incompressible: the transcoder sends it as it is
    Steps.step("set over the limit", () -> c.set(k("big"), 0, over));
  }
}
