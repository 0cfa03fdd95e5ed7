import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.ServerVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import io.netty.channel.Channel;

import java.util.concurrent.CountDownLatch;

/**
 * mongo-java-server (in-memory) for Perseid's test suites, on 127.0.0.1.
 *
 * Arguments: --port N (default 27019), --wire-version N (default 0: as shipped).
 *
 * Its oplog is on, since change streams need it. mongo-java-server 1.47 reports
 * wire version 8 and has no `hello`, which the Node.js driver 7 refuses; with
 * --wire-version 13 the isMaster reply carries 13 and `hello` is answered like
 * isMaster, and nothing else changes.
 */
public final class PerseidMongoJavaServer {
    public static void main(String[] args) throws Exception {
        int port = 27019;
        int wire = 0;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--port")) port = Integer.parseInt(args[++i]);
            else if (args[i].equals("--wire-version")) wire = Integer.parseInt(args[++i]);
            else {
                System.err.println("unknown argument " + args[i]);
                System.exit(2);
            }
        }
        final int reportedWire = wire;
        MemoryBackend backend = new MemoryBackend() {
            @Override
            public Document handleCommand(Channel channel, String database, String command, Document query) {
                boolean hello = command.equals("hello");
                Document reply = super.handleCommand(channel, database, hello ? "isMaster" : command, query);
                if (reportedWire > 0 && reply != null && (hello || command.equalsIgnoreCase("isMaster"))) {
                    reply.put("maxWireVersion", reportedWire);
                    if (hello) reply.put("isWritablePrimary", Boolean.TRUE);
                    if (query.containsKey("helloOk")) reply.put("helloOk", Boolean.TRUE);
                }
                return reply;
            }
        };
        backend.version(ServerVersion.MONGO_5_0);
        MongoServer server = new MongoServer(backend);
        server.enableOplog();
        server.bind("127.0.0.1", port);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.shutdownNow();
            stopped.countDown();
        }));
        System.out.println("mongo-java-server listening on 127.0.0.1:" + port);
        stopped.await();
    }
}
