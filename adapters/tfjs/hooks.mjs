// Loading TensorFlow.js's ES module build in Node. tfjs-core's CommonJS build (its "main")
// registers no gradients; its ES module build does (dist/register_all_gradients.js), but its
// imports name files without the ".js" that Node's ES module loader needs, and reach the
// package by its bare name, which Node would resolve to the CommonJS build: a second engine.
// This resolve hook adds the extensions and maps both packages to their ES module entry.
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const root = (name) => require.resolve(`${name}/package.json`).replace(/package\.json$/, '');
const ENTRY = {
  '@tensorflow/tfjs-core': pathToFileURL(root('@tensorflow/tfjs-core') + 'dist/index.js').href,
  '@tensorflow/tfjs-backend-cpu':
    pathToFileURL(root('@tensorflow/tfjs-backend-cpu') + 'dist/index.js').href,
};

function withExtension(url) {
  const path = fileURLToPath(url);
  if (existsSync(path + '.js')) return url.href + '.js';
  if (existsSync(path) && statSync(path).isDirectory()) return url.href + '/index.js';
  return null;
}

export async function resolve(specifier, context, next) {
  if (ENTRY[specifier]) return { url: ENTRY[specifier], shortCircuit: true };
  const deep = specifier.match(/^(@tensorflow\/tfjs-(?:core|backend-cpu))\/(.*)$/);
  let url = null;
  if (deep) url = new URL(deep[2], pathToFileURL(root(deep[1])));
  else if (specifier.startsWith('.') && context.parentURL) url = new URL(specifier, context.parentURL);
  if (url && !url.pathname.endsWith('.js')) {
    const found = withExtension(url);
    if (found) return { url: found, shortCircuit: true };
  }
  return next(specifier, context);
}
