-- expect: class=synthetic columns=
-- a PrivTree synopsis of the places' coordinates, charged once; range counts from it are free
CREATE SYNTHETIC TABLE cities_tree FROM cities USING privtree WITH (epsilon = 1, columns = 'lon, lat');
