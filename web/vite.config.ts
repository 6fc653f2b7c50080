// corral's browser editor. `npm run build` writes dist/, which the server embeds (crates/server/build.rs)
// and serves at `/`. Everything the page needs is in the bundle: nothing is fetched from the internet.
import { resolve } from 'node:path';
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // No data: URIs and no inline scripts: the server's CSP allows scripts from 'self' only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    chunkSizeWarningLimit: 2000,
    rollupOptions: {
      input: {
        index: resolve(import.meta.dirname, 'index.html'),
        staff: resolve(import.meta.dirname, 'staff.html'),
      },
    },
  },
  server: {
    // `npm run dev` talks to a `corral serve` on the default port.
    proxy: {
      '^/(upload|run|check|suites|ws|uploads|sandboxes|tokens|whoami|languages|health|revisions|submissions)':
        { target: 'http://127.0.0.1:8080', ws: true },
    },
  },
});
